package telemetry_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The alert rules of docs/monitoring are valid and fire when they should
// (promtool's rule unit tests in testdata/alerts_test.yml). Skips without
// promtool unless COUNTERSIGN_REQUIRE_PROMTOOL=1 (CI installs it).
func TestAlertRules(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("COUNTERSIGN_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool is required (COUNTERSIGN_REQUIRE_PROMTOOL=1) but not installed")
		}
		t.Skip("promtool is not installed (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "../../docs/monitoring/countersign-alerts.yml"},
		{"test", "rules", "testdata/alerts_test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
