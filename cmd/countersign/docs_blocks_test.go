package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/web"
	"gopkg.in/yaml.v3"
)

// Every fenced code block of README.md and docs/*.md is checked, so that
// documentation that drifts from the code fails CI (issue 24, point 9).
// TestDocumentedCommandsWork runs the countersign command lines; this test
// looks at every block, by its language:
//
//   - sh, bash, shell: every line is a command this test knows how to check.
//     countersign lines are run by TestDocumentedCommandsWork; go test/run/
//     build/install name packages that exist and -run/-bench patterns that
//     name existing tests; scripts exist and are executable; curl lines name
//     an endpoint of web/openapi.json with its method, and send valid JSON;
//     docker compose lines name services and profiles of docker-compose.yml
//     and docker build arguments the Dockerfile declares; npm and node lines
//     name files that exist; echo lines run. Anything else fails.
//   - a block without a language is output or a diagram; any line in it that
//     is a command is checked as above (countersign lines are parsed: the
//     subcommand and its flags must exist).
//   - json is parsed (a sequence of values, as a JWT's header and payload).
//   - yaml is decoded into the policy file with unknown fields refused; a
//     whole policy file (principals and routes) is validated by
//     config.Parse; a fragment (a route, a field of one) is decoded in place.
//   - go is compiled, as a package of its own in this module.
//   - python is parsed (python3's ast), when python3 is installed.
//
// docsProseOnly is the small list of blocks that nothing here can check.
var docsProseOnly = []struct{ file, starts, why string }{
	{"docs/agent-hosts.md", "const deleteBranch = tool({", "TypeScript: no compiler here (examples/agent-hosts holds the runnable file)"},
	{"docs/agent-hosts.md", ".addNode(\"tools\"", "TypeScript: a fragment of examples/agent-hosts/langgraph.ts; no compiler here"},
	{"docs/mcp.md", "const transport = new StreamableHTTPClientTransport", "TypeScript: no compiler here (mcpserver/testdata/tsclient runs the SDK client)"},
	{"docs/receipts.md", "import { createRemoteJWKSet, jwtVerify } from 'jose';", "TypeScript: no compiler here"},
	{"docs/SPEC.md", "upstreams:", "the gateway's upstreams (SPEC §12) are not in the policy file yet (docs/gateway.md)"},
	{"docs/measurements.md", "scripts/load.sh -c 1", "a transcript of the earlier scripts/load.sh, kept for comparison (the page says scripts/bench.sh replaced it)"},
	{"docs/measurements.md", "LOAD_REDIS_URL=", "a transcript of the earlier scripts/load.sh on a cluster, kept for comparison"},
}

type docBlock struct {
	file  string
	line  int // of the opening fence
	lang  string
	lines []string
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// readBlocks returns every fenced code block of a markdown file, its lines
// dedented by the fence's indentation.
func readBlocks(t *testing.T, path, name string) []docBlock {
	raw, err := os.ReadFile(path)
	must(t, err)
	var out []docBlock
	var cur *docBlock
	var indent string
	for i, l := range strings.Split(string(raw), "\n") {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			if cur == nil {
				indent = m[1]
				cur = &docBlock{file: name, line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, strings.TrimPrefix(l, indent))
		}
	}
	if cur != nil {
		t.Errorf("%s: a code block opened at line %d is never closed", name, cur.line)
	}
	return out
}

func TestEveryDocumentedBlockIsChecked(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	must(t, err)
	files = append([]string{"../../README.md"}, files...)
	var blocks []docBlock
	for _, f := range files {
		blocks = append(blocks, readBlocks(t, f, strings.TrimPrefix(f, "../../"))...)
	}
	if len(blocks) < 100 {
		t.Fatalf("found %d code blocks: is the extraction broken?", len(blocks))
	}
	used := map[int]bool{}
	var goBlocks []docBlock
	counts := map[string]int{}
	for _, b := range blocks {
		if i := slices.IndexFunc(docsProseOnly, func(p struct{ file, starts, why string }) bool {
			return p.file == b.file && len(b.lines) > 0 && strings.HasPrefix(b.lines[0], p.starts)
		}); i >= 0 {
			used[i] = true
			counts["prose only"]++
			continue
		}
		counts[b.lang]++
		switch b.lang {
		case "sh", "bash", "shell":
			checkShellBlock(t, b, true)
		case "":
			checkShellBlock(t, b, false)
		case "json":
			checkJSONBlock(t, b)
		case "yaml":
			checkYAMLBlock(t, b)
		case "go":
			goBlocks = append(goBlocks, b)
		case "python":
			checkPythonBlock(t, b)
		default:
			t.Errorf("%s: a %q block, which this test cannot check: check it here, or list it in docsProseOnly with why", b.where(), b.lang)
		}
	}
	for i, p := range docsProseOnly {
		if !used[i] {
			t.Errorf("docsProseOnly lists a block of %s starting %q that is no longer there", p.file, p.starts)
		}
	}
	checkGoBlocks(t, goBlocks)
	t.Logf("checked %d blocks: %v", len(blocks), counts)
}

// --- shell -------------------------------------------------------------

// commandRE is a line of an unlabelled block that is a command, not output.
var commandRE = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*=\S*\s+)*(countersign|go|scripts/\S+|bash|curl|docker|npm|npx|node|claude|cd|\(cd)(\s|$)`)

// outputRE is a line of output that starts like a command ("countersign
// load: 2100 full loops…").
var outputRE = regexp.MustCompile(`^\S+ \S+: `)

// splitOutsideQuotes splits s at sep where sep is not quoted.
func splitOutsideQuotes(s, sep string) []string {
	var out []string
	inS, inD, last := false, false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\'' && !inD:
			inS = !inS
		case s[i] == '"' && !inS:
			inD = !inD
		case !inS && !inD && strings.HasPrefix(s[i:], sep):
			out = append(out, s[last:i])
			last = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(out, s[last:])
}

// shellLines joins continued lines (a trailing backslash, or a quote left
// open) and drops comments and blank lines.
func shellLines(block []string) []string {
	var out []string
	for i := 0; i < len(block); i++ {
		text := block[i]
		for i+1 < len(block) && (strings.HasSuffix(text, "\\") || strings.Count(stripComment(text), "'")%2 == 1) {
			i++
			if strings.HasSuffix(text, "\\") {
				text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(block[i])
			} else {
				text += "\n" + block[i]
			}
		}
		text = strings.TrimSpace(stripComment(text))
		if text != "" {
			out = append(out, text)
		}
	}
	return out
}

// stripComment cuts a trailing "# …" outside quotes.
func stripComment(s string) string {
	inS, inD := false, false
	for i, r := range s {
		switch {
		case r == '\'' && !inD:
			inS = !inS
		case r == '"' && !inS:
			inD = !inD
		case r == '#' && !inS && !inD && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

func checkShellBlock(t *testing.T, b docBlock, commands bool) {
	cwd := "."
	for _, line := range shellLines(b.lines) {
		if !commands && (!commandRE.MatchString(line) || outputRE.MatchString(line)) {
			continue // output
		}
		for _, part := range splitOutsideQuotes(line, "&&") {
			part = strings.Trim(strings.TrimSpace(part), "()")
			for _, cmd := range splitOutsideQuotes(part, ";") {
				if cmd = strings.TrimSpace(cmd); cmd != "" {
					if err := checkCommand(cmd, &cwd, commands); err != nil {
						t.Errorf("%s: %s\n%v", b.where(), cmd, err)
					}
				}
			}
		}
	}
}

// checkCommand checks one simple command; cwd follows cd.
func checkCommand(cmd string, cwd *string, runnable bool) error {
	words := strings.Fields(cmd)
	for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil // assignments (K=devkey; API=…)
	}
	switch w := words[0]; {
	case w == "export":
		return nil
	case isCountersignLine(strings.Join(words, " ")):
		if runnable {
			return nil // run by TestDocumentedCommandsWork
		}
		return checkCountersignArgs(words)
	case w == "cd":
		*cwd = filepath.Join(*cwd, words[1])
		return dirExists(*cwd)
	case w == "go":
		return checkGoCommand(words)
	case strings.HasPrefix(w, "scripts/") || w == "bash":
		return checkScript(words)
	case w == "curl":
		return checkCurl(cmd)
	case w == "docker":
		return checkDocker(words)
	case w == "npm":
		if len(words) < 2 || words[1] != "ci" {
			return fmt.Errorf("only npm ci is checked")
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			if _, err := os.Stat(filepath.Join("../..", *cwd, f)); err != nil {
				return fmt.Errorf("npm ci in %s: %v", *cwd, err)
			}
		}
		return nil
	case w == "node":
		f := words[len(words)-1]
		if _, err := os.Stat(filepath.Join("../..", *cwd, f)); err != nil {
			return fmt.Errorf("node runs %s in %s: %v", f, *cwd, err)
		}
		return nil
	case w == "npx":
		return nil // a package from npm's registry: needs the network, not run here
	case w == "claude":
		// The MCP host's own command; what it starts must be a countersign line.
		if i := slices.Index(words, "--"); i >= 0 {
			return checkCountersignArgs(words[i+1:])
		}
		if !slices.Contains(words, "--transport") || !strings.HasSuffix(words[slices.Index(words, "--transport")+3], "/mcp") {
			return fmt.Errorf("a claude mcp add line neither starts countersign nor names its /mcp endpoint")
		}
		return nil
	case w == "echo":
		out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	return fmt.Errorf("a command this test does not know how to check: check it in docs_blocks_test.go")
}

func dirExists(dir string) error {
	if st, err := os.Stat(filepath.Join("../..", dir)); err != nil || !st.IsDir() {
		return fmt.Errorf("no directory %s", dir)
	}
	return nil
}

// checkCountersignArgs parses a countersign line as the binary would:
// the subcommand and every flag must exist.
func checkCountersignArgs(words []string) error {
	args, err := shellWords(strings.Join(words, " "), map[string]string{})
	if err != nil {
		return err
	}
	if args[0] == "go" {
		args = args[2:]
	}
	root := newRoot(&cli{env: mapEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	c, rest, err := root.Find(args[1:])
	if err != nil {
		return err
	}
	if c == root && len(args) > 1 {
		return fmt.Errorf("no subcommand %q", args[1])
	}
	return c.ParseFlags(rest)
}

// checkGoCommand: the packages exist, and -run and -bench name tests and
// benchmarks that exist in them; go run of a module is pinned to a version.
func checkGoCommand(words []string) error {
	if len(words) < 2 {
		return fmt.Errorf("go without a subcommand")
	}
	var pkgs []string
	var run, bench, tags string
	for i := 2; i < len(words); i++ {
		w := strings.Trim(words[i], `'"`)
		switch {
		case w == "-run" || w == "-bench" || w == "-tags":
			i++
			v := strings.Trim(words[i], `'"`)
			*map[string]*string{"-run": &run, "-bench": &bench, "-tags": &tags}[w] = v
		case strings.HasPrefix(w, "./"):
			pkgs = append(pkgs, strings.TrimSuffix(strings.TrimSuffix(w, "..."), "/"))
		case strings.Contains(w, "@") && words[1] == "run":
			if !regexp.MustCompile(`@v\d+\.\d+\.\d+$`).MatchString(w) {
				return fmt.Errorf("go run %s: not pinned to a version", w)
			}
			return nil // a module from the proxy: needs the network
		}
	}
	if len(pkgs) == 0 && words[1] != "env" {
		return fmt.Errorf("no package named")
	}
	var funcs []string
	for _, p := range pkgs {
		if err := dirExists(p); err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join("../..", p, "*_test.go"))
		for _, f := range files {
			src, _ := os.ReadFile(f)
			for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w*)\(`).FindAllStringSubmatch(string(src), -1) {
				funcs = append(funcs, m[1])
			}
		}
	}
	for _, name := range strings.Split(run, "|") {
		name = strings.Trim(name, "^$()")
		if name == "" || name == "." {
			continue
		}
		name, _, _ = strings.Cut(name, "/")
		if !slices.ContainsFunc(funcs, func(f string) bool { return strings.HasPrefix(f, name) }) {
			return fmt.Errorf("-run %s: no test %s in %v", run, name, pkgs)
		}
	}
	if bench != "" && bench != "." && !slices.ContainsFunc(funcs, func(f string) bool {
		return strings.HasPrefix(f, "Benchmark") && strings.Contains(f, bench)
	}) {
		return fmt.Errorf("-bench %s: no such benchmark in %v", bench, pkgs)
	}
	return nil
}

// checkScript: the script exists and is executable, and the tests its
// -run names, and the files it is given, exist.
func checkScript(words []string) error {
	script := words[0]
	if script == "bash" {
		script = words[1]
	}
	st, err := os.Stat(filepath.Join("../..", script))
	if err != nil {
		return err
	}
	if words[0] != "bash" && st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", script)
	}
	for i := 1; i < len(words); i++ {
		w := strings.Trim(words[i], `'"`)
		switch {
		case w == "-run" && script == "scripts/faults.sh":
			if err := checkGoCommand([]string{"go", "test", "-run", words[i+1], "./faults/"}); err != nil {
				return err
			}
			i++
		case strings.HasPrefix(w, "-"):
			if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && w != "-short" && w != "-list" && w != "-v" {
				i++ // a flag's value
			}
		case strings.Contains(w, "/") || strings.HasSuffix(w, ".go"):
			if _, err := os.Stat(filepath.Join("../..", w)); err != nil {
				return fmt.Errorf("%s is given %s: %v", script, w, err)
			}
		}
	}
	return nil
}

// curlRequest is a documented curl line as a request.
type curlRequest struct {
	method, url, body string
	headers           map[string]string
}

// parseCurl reads the curl flags the docs use; env resolves $VAR.
func parseCurl(cmd string, env map[string]string) (curlRequest, error) {
	words, err := shellWords(cmd, env)
	if err != nil {
		return curlRequest{}, err
	}
	r := curlRequest{headers: map[string]string{}}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; w {
		case "-s":
		case "-X":
			r.method, i = words[i+1], i+1
		case "-H":
			k, v, _ := strings.Cut(words[i+1], ":")
			r.headers[k] = strings.TrimSpace(v)
			i++
		case "-o":
			i++
		case "-d", "--data":
			r.body, i = words[i+1], i+1
		default:
			if strings.HasPrefix(w, "-") {
				return r, fmt.Errorf("curl flag %s: not checked here", w)
			}
			r.url = w
		}
	}
	if r.method == "" {
		r.method = "GET"
		if r.body != "" {
			r.method = "POST"
		}
	}
	return r, nil
}

// checkCurl: the URL is an endpoint of web/openapi.json (or /mcp) with
// the method used, and a JSON body is JSON.
func checkCurl(cmd string) error {
	r, err := parseCurl(cmd, map[string]string{"API": "http://127.0.0.1:8080/v1", "K": "devkey", "OP": "op_x"})
	if err != nil {
		return err
	}
	method, url, body := r.method, r.url, r.body
	if body != "" && !json.Valid([]byte(body)) {
		return fmt.Errorf("the body is not JSON: %s", body)
	}
	_, path, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://"), "/")
	if !ok {
		return fmt.Errorf("no path in %s", url)
	}
	path, _, _ = strings.Cut("/"+path, "?")
	if path == "/mcp" && method == "POST" {
		return nil // MCP over streamable HTTP (docs/mcp.md), not in the OpenAPI description
	}
	var spec struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(web.OpenAPI, &spec); err != nil {
		return err
	}
	for p, ops := range spec.Paths {
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$"
		if regexp.MustCompile(re).MatchString(path) {
			if _, ok := ops[strings.ToLower(method)]; !ok {
				return fmt.Errorf("%s has no %s in web/openapi.json", p, method)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %s is not an endpoint of web/openapi.json", method, path)
}

// checkDocker: compose lines name services and profiles of
// docker-compose.yml; docker build's arguments are ARGs of the Dockerfile.
func checkDocker(words []string) error {
	if len(words) > 1 && words[1] == "build" {
		df, err := os.ReadFile("../../Dockerfile")
		if err != nil {
			return err
		}
		for i, w := range words {
			if w == "--build-arg" {
				name, _, _ := strings.Cut(words[i+1], "=")
				if !regexp.MustCompile(`(?m)^ARG ` + regexp.QuoteMeta(name) + `\b`).Match(df) {
					return fmt.Errorf("the Dockerfile declares no ARG %s", name)
				}
			}
		}
		return nil
	}
	if len(words) < 3 || words[1] != "compose" {
		return fmt.Errorf("only docker compose and docker build are checked")
	}
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		return err
	}
	var compose struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		return err
	}
	for i := 2; i < len(words); i++ {
		switch w := words[i]; {
		case w == "--profile":
			found := false
			for _, s := range compose.Services {
				found = found || slices.Contains(s.Profiles, words[i+1])
			}
			if !found {
				return fmt.Errorf("no service of docker-compose.yml has the profile %s", words[i+1])
			}
			i++
		case w == "run" || w == "logs":
			j := i + 1
			for j < len(words) && strings.HasPrefix(words[j], "-") {
				j++
			}
			if _, ok := compose.Services[words[j]]; !ok {
				return fmt.Errorf("docker-compose.yml has no service %s", words[j])
			}
			if w == "run" && words[j] == "countersign" { // the image's entry point is countersign
				rest := words[j+1:]
				if k := slices.Index(rest, ">"); k >= 0 {
					rest = rest[:k]
				}
				return checkCountersignArgs(append([]string{"countersign"}, rest...))
			}
			i = j
		}
	}
	return nil
}

// --- data --------------------------------------------------------------

func checkJSONBlock(t *testing.T, b docBlock) {
	dec := json.NewDecoder(strings.NewReader(strings.Join(b.lines, "\n")))
	for n := 0; ; n++ {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF && n > 0 {
			return
		}
		if err != nil {
			t.Errorf("%s: not JSON: %v", b.where(), err)
			return
		}
	}
}

var placeholderHash = regexp.MustCompile(`api_key_sha256: "…"`)

// checkYAMLBlock decodes a YAML block into the policy file, refusing
// unknown fields; a whole policy file is validated too.
func checkYAMLBlock(t *testing.T, b docBlock) {
	text := strings.Join(b.lines, "\n")
	first := ""
	for _, l := range b.lines {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
			first = l
			break
		}
	}
	switch {
	case strings.HasPrefix(strings.TrimSpace(first), "- "): // a route
		text = "routes:\n" + indentLines(dedent(b.lines), "  ")
	case strings.HasPrefix(first, " "): // a field of a route
		text = "routes:\n  - " + strings.TrimSpace(text) + "\n"
	}
	// A whole policy file is validated; SPEC.md's shows every field once
	// with placeholders (teams_user_id "29:1Ab…") and is decoded only.
	whole := regexp.MustCompile(`(?m)^principals:`).MatchString(text) && regexp.MustCompile(`(?m)^routes:`).MatchString(text) &&
		b.file != "docs/SPEC.md"
	if whole {
		n := 0
		text = placeholderHash.ReplaceAllStringFunc(text, func(string) string {
			n++
			return fmt.Sprintf("api_key_sha256: %q", apiKeyHash(fmt.Sprintf("cs_docs_key_%d", n)))
		})
		if _, err := config.Parse([]byte(text)); err != nil {
			t.Errorf("%s: the policy file is not valid: %v", b.where(), err)
		}
		return
	}
	var f config.File
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Errorf("%s: not a part of the policy file: %v\n%s", b.where(), err, text)
	}
}

func dedent(lines []string) []string {
	pre := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); pre < 0 || n < pre {
			pre = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= pre && pre > 0 {
			l = l[pre:]
		}
		out[i] = l
	}
	return out
}

func indentLines(lines []string, by string) string {
	return by + strings.Join(lines, "\n"+by) + "\n"
}

func checkPythonBlock(t *testing.T, b docBlock) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Logf("%s: python3 is not installed: not parsed", b.where())
		return
	}
	cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(strings.Join(b.lines, "\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: not Python: %v\n%s", b.where(), err, out)
	}
}

// --- go ----------------------------------------------------------------

var topDeclRE = regexp.MustCompile(`^(func|type|var|const) `)

// goSnippetFile makes a compilable file of a snippet: its imports, its
// declarations at the top level, its statements in a function body.
func goSnippetFile(lines []string) string {
	var imports, decls, stmts []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "import ("):
			for ; i < len(lines) && lines[i] != ")"; i++ {
				imports = append(imports, lines[i])
			}
			imports = append(imports, ")")
		case strings.HasPrefix(l, "import "):
			imports = append(imports, l)
		case topDeclRE.MatchString(l):
			decls = append(decls, l)
			if strings.HasSuffix(l, "{") || strings.HasSuffix(l, "(") {
				for i++; i < len(lines); i++ {
					decls = append(decls, lines[i])
					if lines[i] == "}" || lines[i] == ")" {
						break
					}
				}
			}
		default:
			stmts = append(stmts, l)
		}
	}
	// What the snippets leave to the reader's program: a context, the
	// target's handler, the request a handler runs.
	const reader = "var (\n\tctx context.Context\n\tapi http.Handler\n\tr   *http.Request\n)\n\n"
	return "package main\n\n" + strings.Join(imports, "\n") + "\n\n" + reader + strings.Join(decls, "\n") +
		"\n\nfunc main() {\n" + strings.Join(stmts, "\n") + "\n}\n"
}

// checkGoBlocks compiles every Go block as a package of this module;
// goimports adds the standard imports a snippet leaves out. A variable a
// snippet declares and does not use is the reader's to use.
func checkGoBlocks(t *testing.T, blocks []docBlock) {
	goimports, err := exec.LookPath("goimports")
	if err != nil {
		goimports = filepath.Join(os.Getenv("HOME"), "go/bin/goimports")
	}
	if _, err := os.Stat(goimports); err != nil {
		t.Fatalf("goimports is needed to compile the documented Go snippets: %v", err)
	}
	// Inside the module, so that a snippet imports its packages; "_" keeps
	// it out of ./... should a run be cut short.
	dir, err := os.MkdirTemp(".", "_docsnippets-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	at := map[string]docBlock{}
	for i, b := range blocks {
		p := filepath.Join(dir, fmt.Sprint(i))
		must(t, os.MkdirAll(p, 0o755))
		f := filepath.Join(p, "main.go")
		must(t, os.WriteFile(f, []byte(goSnippetFile(b.lines)), 0o644))
		if out, err := exec.Command(goimports, "-w", f).CombinedOutput(); err != nil {
			t.Errorf("%s: goimports: %v\n%s", b.where(), err, out)
		}
		pkgs = append(pkgs, "./"+p)
		at[p] = b
	}
	out, _ := exec.Command("go", append([]string{"vet"}, pkgs...)...).CombinedOutput()
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if l == "" || strings.HasPrefix(l, "#") || strings.Contains(l, "declared and not used") {
			continue
		}
		b, ok := docBlock{}, false
		for p, blk := range at {
			if strings.Contains(l, p+"/") {
				b, ok = blk, true
			}
		}
		if ok {
			t.Errorf("%s: the Go snippet does not compile: %s", b.where(), l)
		} else {
			t.Errorf("compiling the Go snippets: %s", l)
		}
	}
}
