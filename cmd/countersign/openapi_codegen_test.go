package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPIGoClientRecipe runs README's oapi-codegen line, as written,
// on web/openapi.json and compiles what it generates in a module of its
// own: the recipe promises a client that compiles. It fetches oapi-codegen
// through the module proxy, so -short skips it.
func TestOpenAPIGoClientRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches and runs oapi-codegen through the module proxy")
	}
	f, err := os.Open("../../README.md")
	must(t, err)
	defer f.Close()
	var recipe []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "go run github.com/oapi-codegen/oapi-codegen/") {
			recipe = strings.Fields(l)
		}
	}
	// go run …@vX -generate … -package countersign countersign.openapi.json > countersign.gen.go
	if len(recipe) < 4 || recipe[len(recipe)-2] != ">" || recipe[len(recipe)-3] != "countersign.openapi.json" {
		t.Fatalf("README's oapi-codegen line is not `go run … countersign.openapi.json > FILE`: %q", recipe)
	}
	dir := t.TempDir()
	spec, err := os.ReadFile("../../web/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "countersign.openapi.json"), spec, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/csclient\n\ngo 1.26\n"), 0o600))
	out, err := os.Create(filepath.Join(dir, recipe[len(recipe)-1]))
	must(t, err)
	defer out.Close()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	gen := exec.Command("go", recipe[1:len(recipe)-2]...)
	var stderr bytes.Buffer
	gen.Dir, gen.Env, gen.Stdout, gen.Stderr = dir, env, out, &stderr
	if err := gen.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(recipe, " "), err, stderr.String())
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "./..."}} {
		c := exec.Command("go", args...)
		c.Dir, c.Env = dir, env
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the generated client: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}
