package teamsapp_test

import (
	"encoding/json"
	"image/png"
	"os"
	"slices"
	"testing"
)

// The shipped Teams app manifest declares a bot that can be reached in
// 1:1 chats and teams and receives invokes (not notification-only), with
// the icons Teams requires.
func TestManifest(t *testing.T) {
	raw, err := os.ReadFile("../manifest/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ManifestVersion string `json:"manifestVersion"`
		ID              string `json:"id"`
		Icons           struct{ Color, Outline string }
		Bots            []struct {
			BotID              string   `json:"botId"`
			Scopes             []string `json:"scopes"`
			IsNotificationOnly bool     `json:"isNotificationOnly"`
		} `json:"bots"`
		ValidDomains []string `json:"validDomains"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ManifestVersion != "1.17" || len(m.Bots) != 1 || m.Bots[0].BotID != m.ID || m.Bots[0].IsNotificationOnly ||
		!slices.Contains(m.Bots[0].Scopes, "personal") || !slices.Contains(m.Bots[0].Scopes, "team") || len(m.ValidDomains) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	for file, size := range map[string]int{m.Icons.Color: 192, m.Icons.Outline: 32} {
		f, err := os.Open("../manifest/" + file)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() != size || img.Bounds().Dy() != size {
			t.Errorf("%s: %v %v, want %dx%d", file, err, img.Bounds(), size, size)
		}
	}
}
