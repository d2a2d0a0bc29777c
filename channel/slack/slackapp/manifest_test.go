package slackapp_test

import (
	"net/url"
	"os"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// The shipped manifest turns interactivity on at the handler's path and
// asks for the scopes the code uses.
func TestManifest(t *testing.T) {
	raw, err := os.ReadFile("../manifest/manifest.yml")
	if err != nil {
		t.Fatal(err)
	}
	type manifest struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Interactivity struct {
				Enabled    bool   `yaml:"is_enabled"`
				RequestURL string `yaml:"request_url"`
			} `yaml:"interactivity"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
	}
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(m.Settings.Interactivity.RequestURL)
	if !m.Settings.Interactivity.Enabled || err != nil || u.Scheme != "https" || u.Path != "/slack/interactions" || m.Settings.SocketMode {
		t.Fatalf("interactivity %+v", m.Settings)
	}
	for _, s := range []string{"chat:write", "im:write", "channels:history", "groups:history", "im:history"} {
		if !slices.Contains(m.OAuth.Scopes.Bot, s) {
			t.Errorf("bot scope %s missing", s)
		}
	}

	// The Socket Mode manifest: interactivity over the socket, no URL.
	raw, err = os.ReadFile("../manifest/manifest-socket.yml")
	if err != nil {
		t.Fatal(err)
	}
	var sm manifest
	if err := yaml.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	if !sm.Settings.Interactivity.Enabled || sm.Settings.Interactivity.RequestURL != "" || !sm.Settings.SocketMode ||
		!slices.Equal(sm.OAuth.Scopes.Bot, m.OAuth.Scopes.Bot) {
		t.Fatalf("socket mode manifest %+v", sm)
	}
}
