package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/store"
	"gopkg.in/yaml.v3"
)

// There is no container engine where these tests run: what can be checked
// without one is checked here (the compose file's structure, the
// Dockerfile's pins, the profile's policy file and .env keys run by the
// real service), and docker-compose config validates the file where
// Debian's docker-compose is installed.

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Ports       []string          `yaml:"ports"`
		EnvFile     []string          `yaml:"env_file"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Profiles []string `yaml:"profiles"`
		Volumes  []string `yaml:"volumes"`
		Command  []string `yaml:"command"`
	} `yaml:"services"`
}

var pinnedTag = regexp.MustCompile(`^[a-z0-9./_-]+:(v?[0-9]+\.[0-9]+\.[0-9]+[a-z0-9.-]*)$`)

func TestDockerComposeFitToRun(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	must(t, err)
	var cf composeFile
	must(t, yaml.Unmarshal(raw, &cf))
	if len(cf.Services) < 4 {
		t.Fatalf("services: %v", cf.Services)
	}
	var policy string
	for name, s := range cf.Services {
		if s.Build == nil && !pinnedTag.MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 {
			t.Errorf("%s has no healthcheck", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q beyond this machine", name, p)
			}
		}
		if strings.HasPrefix(name, "countersign") {
			if len(s.EnvFile) != 1 || s.EnvFile[0] != ".env" {
				t.Errorf("%s does not read its keys from .env: %v", name, s.EnvFile)
			}
			if s.Environment["COUNTERSIGN_PUBLIC_URL"] == "" {
				t.Errorf("%s sets no COUNTERSIGN_PUBLIC_URL", name)
			}
			if got := strings.Join(s.Healthcheck.Test, " "); got != "CMD /usr/local/bin/countersign healthcheck" {
				t.Errorf("%s healthcheck %q", name, got)
			}
		}
		if len(s.Profiles) == 1 && s.Profiles[0] == "policy" {
			if s.Environment["COUNTERSIGN_CONFIG"] == "" || len(s.Volumes) != 1 {
				t.Fatalf("the policy profile mounts no policy file: %+v", s)
			}
			src, dst, _ := strings.Cut(strings.TrimSuffix(s.Volumes[0], ":ro"), ":")
			if dst != s.Environment["COUNTERSIGN_CONFIG"] {
				t.Errorf("policy mounted at %s, COUNTERSIGN_CONFIG %s", dst, s.Environment["COUNTERSIGN_CONFIG"])
			}
			policy = filepath.Join("../..", src)
		}
	}
	if r := strings.Join(cf.Services["redis"].Command, " "); !strings.Contains(r, "--appendonly yes") || !strings.Contains(r, "--maxmemory-policy noeviction") ||
		!strings.Contains(r, "--hash-max-listpack-value "+strconv.Itoa(store.CompactHashValue)) {
		t.Errorf("redis runs %q: want AOF, noeviction and compact hashes", r)
	}
	if policy == "" {
		t.Fatal("no service of the policy profile")
	}

	// The profile's policy file and the keys keygen --env writes run the
	// real service (as the container would, minus the container).
	code, envFile, stderr := runCLI(t, nil, "keygen", "--env")
	if code != 0 {
		t.Fatalf("keygen --env: %d %s", code, stderr)
	}
	env := map[string]string{}
	for _, l := range strings.Split(envFile, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			env[k] = v
		}
	}
	if env["COUNTERSIGN_LINK_KEYS"] == "" || env["COUNTERSIGN_RECEIPT_KEYS"] == "" || len(env) != 2 {
		t.Fatalf("keygen --env wrote %q", envFile)
	}
	pol, err := os.ReadFile(policy)
	must(t, err)
	smtp := smtptest.Start(t, smtptest.Options{})
	env["COUNTERSIGN_SMTP_URL"] = smtp.URL()
	srv := startService(t, serviceOpts{Config: string(pol), Env: env})
	if st, b := srv.call(t, "GET", "/readyz", "", ""); st != 200 {
		t.Fatalf("readyz with the profile's policy: %d %s", st, b)
	}
	if kid, _, _ := strings.Cut(env["COUNTERSIGN_RECEIPT_KEYS"], ":"); srv.ReceiptKeyID != kid {
		t.Errorf("receipts are signed by %q, not the .env key %q", srv.ReceiptKeyID, kid)
	}
	for _, w := range []string{"COUNTERSIGN_LINK_KEYS is not set", "COUNTERSIGN_RECEIPT_KEYS is not set"} {
		if strings.Contains(srv.Stderr.String(), w) {
			t.Errorf("with the .env keys the service still warns %q", w)
		}
	}
	if code, out, stderr := runCLI(t, nil, "healthcheck", "--url", srv.URL()); code != 0 || strings.TrimSpace(out) != "ready" {
		t.Errorf("healthcheck of a ready service: %d %q %s", code, out, stderr)
	}

	// Where Debian's docker-compose is installed, it validates the file.
	dc, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Log("docker-compose is not installed; its validation is skipped")
		return
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "docker-compose.yml"), raw, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, ".env"), []byte(envFile), 0o600))
	for _, args := range [][]string{{"config", "-q"}, {"--profile", "policy", "config", "-q"}} {
		if out, err := exec.Command(dc, append([]string{"--project-directory", dir, "-f", filepath.Join(dir, "docker-compose.yml")}, args...)...).CombinedOutput(); err != nil {
			t.Errorf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestDockerfileFitToRun(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	must(t, err)
	df := string(raw)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) != 2 {
		t.Fatalf("FROM lines: %v", froms)
	}
	if !pinnedTag.MatchString(strings.TrimSuffix(froms[0][1], "-bookworm")) && !strings.Contains(froms[0][1], "1.26.8") {
		t.Errorf("build image %s is not pinned to the Go version of go.mod", froms[0][1])
	}
	for _, want := range []string{"USER nonroot", `CMD ["/usr/local/bin/countersign", "healthcheck"]`, "HEALTHCHECK", "CGO_ENABLED=0"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	must(t, err)
	for _, want := range []string{".git", ".env", "**/node_modules"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(ignore) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

// The start warns when links would name the listen address, outside
// development mode, and for an unspecified address in development mode.
func TestPublicURLWarning(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	if !strings.Contains(srv.Stderr.String(), "COUNTERSIGN_PUBLIC_URL is not set") {
		t.Error("no warning without COUNTERSIGN_PUBLIC_URL outside development mode")
	}
	quiet := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: map[string]string{"COUNTERSIGN_PUBLIC_URL": "https://countersign.example", "COUNTERSIGN_SMTP_URL": smtp.URL()}})
	if strings.Contains(quiet.Stderr.String(), "COUNTERSIGN_PUBLIC_URL is not set") {
		t.Error("a warning with COUNTERSIGN_PUBLIC_URL set")
	}
	dev := startService(t, serviceOpts{})
	if strings.Contains(dev.Stderr.String(), "COUNTERSIGN_PUBLIC_URL is not set") {
		t.Error("development mode on 127.0.0.1 warns")
	}
	if code, _, stderr := runCLI(t, nil, "healthcheck", "--url", "http://127.0.0.1:1"); code == 0 || !strings.Contains(stderr, "not healthy") {
		t.Errorf("healthcheck of nothing: exit %d %s", code, stderr)
	}
}
