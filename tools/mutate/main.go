// Command mutate measures how well the tests catch small plausible bugs:
// it makes one mutation at a time (a comparison flipped, a condition
// negated, an early return or a guard's body removed, a boolean result or
// a 0/1 constant changed, && and || swapped; in the store's Lua scripts a
// comparison flipped, and/or swapped, a guard negated or removed) in a
// private copy of the module, runs the tests of the package that holds
// the file, and counts the mutant killed when they fail, time out or do
// not build (build failures are counted apart: they say nothing of the
// tests). It prints the score per package and every survivor.
//
//	go run ./tools/mutate [-max 40] [-seed 1] [-timeout 3m] [-list] TARGET…
//
// A TARGET is a Go file, a Lua script under store/lua, or a package
// directory (all its non-test Go files; store also takes store/lua/*.lua).
// See scripts/mutate.sh and docs/mutation.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	max := flag.Int("max", 40, "mutants sampled per package (0: all)")
	seed := flag.Uint64("seed", 1, "seed of the sample")
	timeout := flag.Duration("timeout", 3*time.Minute, "time allowed to one package's tests per mutant")
	list := flag.Bool("list", false, "list the sampled mutants, run nothing")
	run := flag.String("run", "", "passed to go test -run (default: every test)")
	verbose := flag.Bool("v", false, "print each mutant's outcome as it ends")
	match := flag.String("match", "", "regexp: only the mutants whose description (file:line: mutation) matches, e.g. the survivors of a run")
	workDir := flag.String("work", "", "the copy of the module to mutate in, kept and refreshed between runs so that its build cache stays warm (default: a temporary directory)")
	newTests := flag.String("new", "", "regexp of tests added by a change: a mutant is also judged without them (go test -skip), to give the score before the change")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mutate [flags] TARGET… (Go files, store/lua scripts or package directories)")
		os.Exit(2)
	}
	root, err := moduleRoot()
	if err != nil {
		fail(err)
	}
	groups, err := collect(root, flag.Args())
	if err != nil {
		fail(err)
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			fail(fmt.Errorf("mutate: -match: %w", err))
		}
		for name, g := range groups {
			g.mutants = slices.DeleteFunc(g.mutants, func(m mutant) bool { return !re.MatchString(m.String()) })
			if len(g.mutants) == 0 {
				delete(groups, name)
			}
		}
	}
	rng := rand.New(rand.NewPCG(*seed, 0x6d757461))
	var names []string
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g := groups[name]
		rng.Shuffle(len(g.mutants), func(i, j int) { g.mutants[i], g.mutants[j] = g.mutants[j], g.mutants[i] })
		g.total = len(g.mutants)
		if *max > 0 && len(g.mutants) > *max {
			g.mutants = g.mutants[:*max]
		}
		sort.SliceStable(g.mutants, func(i, j int) bool {
			a, b := g.mutants[i], g.mutants[j]
			return a.File < b.File || a.File == b.File && a.Line < b.Line
		})
	}
	if *list {
		for _, name := range names {
			g := groups[name]
			fmt.Printf("# %s: %d of %d mutants (tests: ./%s)\n", name, len(g.mutants), g.total, g.pkg)
			for _, m := range g.mutants {
				fmt.Println(m)
			}
		}
		return
	}
	work := *workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "mutate-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(work)
	}
	if err := copyTree(root, work); err != nil {
		fail(err)
	}
	r := runner{dir: work, timeout: *timeout, run: *run}
	var all, allBefore score
	var survivors, killedByNew []string
	for _, name := range names {
		g := groups[name]
		var s, before score
		for _, m := range g.mutants {
			out, detail, err := r.try(g.pkg, m, *newTests)
			if err != nil {
				fail(err)
			}
			if *newTests != "" {
				before.add(out)
				if out == survived {
					out, detail, err = r.try(g.pkg, m, "")
					if err != nil {
						fail(err)
					}
					if out != survived {
						killedByNew = append(killedByNew, m.String()+detail)
						detail += " [new]"
					}
				}
			}
			s.add(out)
			if *verbose {
				fmt.Fprintf(os.Stderr, "%-9s %s%s\n", out, m, detail)
			}
			if out == survived {
				survivors = append(survivors, m.String())
			}
		}
		if *newTests != "" {
			fmt.Printf("%-22s before %s\n", name, before)
			allBefore.merge(before)
		}
		fmt.Printf("%-22s %s (of %d mutants)\n", name, s, g.total)
		all.merge(s)
	}
	if *newTests != "" {
		fmt.Printf("%-22s before %s\n", "total", allBefore)
	}
	fmt.Printf("%-22s %s\n", "total", all)
	if *newTests != "" {
		fmt.Printf("\nkilled only by the new tests (%d):\n", len(killedByNew))
		for _, s := range killedByNew {
			fmt.Println("  " + s)
		}
	}
	fmt.Printf("\nsurvivors (%d):\n", len(survivors))
	for _, s := range survivors {
		fmt.Println("  " + s)
	}
}

type group struct {
	pkg     string // the package whose tests judge the mutants
	mutants []mutant
	total   int
}

// collect reads the targets and groups their mutants by package.
func collect(root string, targets []string) (map[string]*group, error) {
	groups := map[string]*group{}
	addFile := func(rel string) error {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return fmt.Errorf("mutate: %w", err)
		}
		name, pkg := filepath.Dir(rel), filepath.Dir(rel)
		var ms []mutant
		switch {
		case strings.HasSuffix(rel, ".lua"):
			pkg = filepath.Dir(name) // store/lua is embedded by store
			ms = luaMutants(rel, src)
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go"):
			if ms, err = goMutants(rel, src); err != nil {
				return err
			}
		default:
			return fmt.Errorf("mutate: %s is neither a Go source nor a Lua script", rel)
		}
		g := groups[name]
		if g == nil {
			g = &group{pkg: pkg}
			groups[name] = g
		}
		g.mutants = append(g.mutants, ms...)
		return nil
	}
	for _, t := range targets {
		rel := filepath.Clean(strings.TrimPrefix(t, "./"))
		info, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			return nil, fmt.Errorf("mutate: target %s: %w", t, err)
		}
		if !info.IsDir() {
			if err := addFile(rel); err != nil {
				return nil, err
			}
			continue
		}
		patterns := []string{"*.go", "*.lua"}
		if rel == "store" {
			patterns = append(patterns, "lua/*.lua")
		}
		for _, p := range patterns {
			files, _ := filepath.Glob(filepath.Join(root, rel, p))
			for _, f := range files {
				fr, _ := filepath.Rel(root, f)
				if strings.HasSuffix(fr, "_test.go") {
					continue
				}
				if err := addFile(fr); err != nil {
					return nil, err
				}
			}
		}
	}
	return groups, nil
}

type outcome string

const (
	killed   outcome = "killed"
	timedOut outcome = "timeout"
	noBuild  outcome = "nobuild"
	survived outcome = "SURVIVED"
)

type score struct{ killed, timedOut, noBuild, survived int }

func (s *score) add(o outcome) {
	switch o {
	case killed:
		s.killed++
	case timedOut:
		s.timedOut++
	case noBuild:
		s.noBuild++
	case survived:
		s.survived++
	}
}

func (s *score) merge(o score) {
	s.killed += o.killed
	s.timedOut += o.timedOut
	s.noBuild += o.noBuild
	s.survived += o.survived
}

// String gives the score over the mutants that built: killed (by a failing
// test or a timeout) out of killed plus survived.
func (s score) String() string {
	k := s.killed + s.timedOut
	pct := 100.0
	if k+s.survived > 0 {
		pct = 100 * float64(k) / float64(k+s.survived)
	}
	return fmt.Sprintf("%5.1f%% killed: %d killed (%d by timeout), %d survived, %d did not build",
		pct, k, s.timedOut, s.survived, s.noBuild)
}

type runner struct {
	dir     string
	timeout time.Duration
	run     string
}

// try applies m in the private copy, runs pkg's tests (but those matching
// skip) and restores the file.
func (r runner) try(pkg string, m mutant, skip string) (outcome, string, error) {
	path := filepath.Join(r.dir, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("mutate: %w", err)
	}
	if err := os.WriteFile(path, m.apply(orig), 0o644); err != nil {
		return "", "", fmt.Errorf("mutate: %w", err)
	}
	defer os.WriteFile(path, orig, 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+time.Minute)
	defer cancel()
	args := []string{"test", "-count=1", "-failfast", "-vet=off", "-p", "1", "-timeout", r.timeout.String()}
	if r.run != "" {
		args = append(args, "-run", r.run)
	}
	if skip != "" {
		args = append(args, "-skip", skip)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./"+pkg)...)
	cmd.Dir = r.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	out := buf.String()
	switch {
	case err == nil:
		return survived, "", nil
	case ctx.Err() != nil || strings.Contains(out, "panic: test timed out"):
		return timedOut, "", nil
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return noBuild, "", nil
	default:
		return killed, " (" + firstFailure(out) + ")", nil
	}
}

// firstFailure names the first failing test in go test's output.
func firstFailure(out string) string {
	for _, ln := range strings.Split(out, "\n") {
		if t := strings.TrimSpace(ln); strings.HasPrefix(t, "--- FAIL:") {
			return strings.Fields(t)[2]
		}
	}
	return "failed"
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("mutate: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("mutate: not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

// copyTree copies the module (without .git) to dst, where mutants are made.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if d.Name() == ".git" || !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		info, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
