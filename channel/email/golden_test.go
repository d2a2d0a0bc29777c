package email_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

var update = flag.Bool("update", false, "rewrite testdata/approval_request.txt")

// The text part pins the layout approvers read; review a diff here as you
// would a UI change. Regenerate with: go test ./notify/email -run Golden -update
func TestTextGolden(t *testing.T) {
	box := mailer.NewDevMailbox(1)
	if _, err := notifier(t, box).Notify(context.Background(), notice(t, grace)); err != nil {
		t.Fatal(err)
	}
	p, err := smtptest.Parse(box.List()[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/approval_request.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(p.Text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Text; got != string(want) {
		t.Errorf("text part differs from %s:\n%s", golden, got)
	}
}
