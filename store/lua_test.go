package store

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every key a script touches comes in KEYS, built by keys.go (asynq's
// rule: a script that builds key names cannot be checked for its slot,
// and splits the key format between Go and Lua). A script that must find
// keys at run time, from the members of an index, names them in its
// header: "Discovers (NAME, …): what — same slot because …", NAME being the
// Lua local that holds the key. This test reads each script's header and
// the key argument of each redis.call, and fails on a key that is neither
// KEYS[n] declared in the header nor a declared discovered local.

// keyless are the commands whose first argument is not a key.
var keyless = map[string]bool{"TIME": true, "PUBLISH": true}

// firstKey are the commands the scripts use whose only key is their first
// argument. A command not listed here (or in keyless) fails the test:
// classify it, and check where its keys are.
var firstKey = map[string]bool{
	"GET": true, "SET": true, "DEL": true, "EXISTS": true, "INCR": true, "PEXPIRE": true, "PTTL": true,
	"HGET": true, "HSET": true, "HSETNX": true, "HDEL": true, "HEXISTS": true, "HINCRBY": true,
	"HINCRBYFLOAT": true, "HGETALL": true, "HMGET": true,
	"ZADD": true, "ZREM": true, "ZRANGEBYSCORE": true, "XADD": true, "XTRIM": true,
}

// luaScript is one file of lua/, read for this test.
type luaScript struct {
	name   string
	header string // the leading comment, without the "--"
	body   string // the code, comments dropped
}

func readLua(t *testing.T, name string) luaScript {
	t.Helper()
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	s := luaScript{name: name}
	var head, body []string
	inHead := true
	for _, line := range strings.Split(string(b), "\n") {
		if inHead && strings.HasPrefix(line, "--") {
			head = append(head, strings.TrimSpace(strings.TrimPrefix(line, "--")))
			continue
		}
		inHead = false
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] // no script puts "--" inside a string
		}
		body = append(body, line)
	}
	s.header, s.body = strings.Join(head, " "), strings.Join(body, "\n")
	return s
}

// clause is the text of the header after label (up to the next label).
func (s luaScript) clause(label string) (string, bool) {
	i := strings.Index(s.header, label)
	if i < 0 {
		return "", false
	}
	rest := s.header[i+len(label):]
	end := len(rest)
	for _, next := range []string{"KEYS:", "ARGV:", "Returns", "Discovers ("} {
		if j := strings.Index(rest, next); j >= 0 && j < end && next != label {
			end = j
		}
	}
	return rest[:end], true
}

var declaredNum = regexp.MustCompile(`(?:^|[\s,(:])(\d+)(?:\s|…)`)

// numbers are the positions a KEYS or ARGV clause declares ("1 lease,
// 2 …", "5 job id", "19… pairs").
func numbers(clause string) []int {
	var out []int
	for _, m := range declaredNum.FindAllStringSubmatch(clause, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// discovered are the locals the header declares as discovered keys, each
// with its reason.
func (s luaScript) discovered() map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`Discovers \(([^)]*)\)`).FindAllStringSubmatchIndex(s.header, -1) {
		why, _ := luaScript{header: s.header[m[1]:]}.clause("")
		for _, name := range strings.Split(s.header[m[2]:m[3]], ",") {
			out[strings.TrimSpace(name)] = why
		}
	}
	return out
}

// calls returns the argument lists of every redis.call and redis.pcall.
func calls(body string) [][]string {
	var out [][]string
	for _, start := range regexp.MustCompile(`redis\.p?call\(`).FindAllStringIndex(body, -1) {
		var args []string
		depth, from, quote := 0, start[1], byte(0)
	scan:
		for i := start[1]; i < len(body); i++ {
			c := body[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '(' || c == '[' || c == '{':
				depth++
			case c == ')' && depth == 0:
				args = append(args, strings.TrimSpace(body[from:i]))
				break scan
			case c == ')' || c == ']' || c == '}':
				depth--
			case c == ',' && depth == 0:
				args = append(args, strings.TrimSpace(body[from:i]))
				from = i + 1
			}
		}
		out = append(out, args)
	}
	return out
}

// locals maps each local of body to the expression assigned to it
// ("local a, b = x, y"; a local assigned twice keeps its first value and
// is reported by the caller as not a KEYS alias).
func locals(body string) map[string][]string {
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)local\s+([A-Za-z_][\w, ]*?)\s*=\s*(.+)$`).FindAllStringSubmatch(body, -1) {
		names := strings.Split(m[1], ",")
		exprs := splitTop(m[2])
		for i, n := range names {
			e := ""
			if len(names) == 1 {
				e = strings.TrimSpace(m[2])
			} else if i < len(exprs) {
				e = exprs[i]
			}
			out[strings.TrimSpace(n)] = append(out[strings.TrimSpace(n)], e)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Za-z_]\w*)\s*=\s*(.+)$`).FindAllStringSubmatch(body, -1) {
		out[m[1]] = append(out[m[1]], strings.TrimSpace(m[2])) // reassigned
	}
	return out
}

func splitTop(s string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[from:i]))
				from = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[from:]))
}

var (
	keysRef = regexp.MustCompile(`^KEYS\[(\d+)\]$`)
	ident   = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	argvRef = regexp.MustCompile(`ARGV\[(\d+)\]`)
)

// opScriptNames are the scripts that Go runs with the prelude
// (opScript("name") in this package's sources).
func opScriptNames(t *testing.T) []string {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	re := regexp.MustCompile(`opScript\("(\w+)"\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// checkKeys returns what is wrong with the keys of s (run after prelude
// when it is an operation script).
func checkKeys(s luaScript, prelude *luaScript) []string {
	var bad []string
	keys, ok := s.clause("KEYS:")
	if !ok {
		bad = append(bad, "its header lists no KEYS")
	}
	declared := numbers(keys)
	disc := s.discovered()
	body := s.body
	if prelude != nil {
		if !strings.Contains(keys, "prelude") {
			bad = append(bad, "it runs with the prelude, and its KEYS do not say so (\"KEYS: the prelude's (1–10)…\")")
		}
		pk, _ := prelude.clause("KEYS:")
		declared = append(declared, numbers(pk)...)
		for n, why := range prelude.discovered() {
			disc[n] = why
		}
		body = prelude.body + "\n" + body
	}
	for n, why := range disc {
		if !strings.Contains(why, "same slot because") {
			bad = append(bad, "discovered "+n+" does not say why it is in the same slot (\"— same slot because …\")")
		}
	}
	vars := locals(body)
	keyOK := func(expr string) string {
		if m := keysRef.FindStringSubmatch(expr); m != nil {
			n, _ := strconv.Atoi(m[1])
			if !slices.Contains(declared, n) {
				return expr + " is not listed in the header's KEYS"
			}
			return ""
		}
		if !ident.MatchString(expr) {
			return "key " + expr + " is built in the script"
		}
		if _, ok := disc[expr]; ok {
			return ""
		}
		vals := vars[expr]
		if len(vals) == 0 {
			return "key " + expr + " is not a local of the script"
		}
		if len(vals) == 1 {
			if m := keysRef.FindStringSubmatch(vals[0]); m != nil {
				n, _ := strconv.Atoi(m[1])
				if !slices.Contains(declared, n) {
					return "key " + expr + " = " + vals[0] + ", not listed in the header's KEYS"
				}
				return ""
			}
		}
		return "key " + expr + " = " + strings.Join(vals, " / ") + " is built in the script and not declared as discovered (\"Discovers (" + expr + "): …\")"
	}
	for _, args := range calls(body) {
		cmd := strings.Trim(args[0], `'"`)
		switch {
		case keyless[cmd]:
		case firstKey[cmd]:
			if len(args) < 2 {
				bad = append(bad, cmd+" without a key")
			} else if why := keyOK(args[1]); why != "" {
				bad = append(bad, cmd+": "+why)
			}
		default:
			bad = append(bad, "redis.call("+args[0]+", …): the test does not know where this command's keys are")
		}
	}
	return bad
}

func TestScriptsTakeTheirKeysInKEYS(t *testing.T) {
	names, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	prelude := readLua(t, "prelude")
	ops := opScriptNames(t)
	if len(ops) < 10 {
		t.Fatalf("found %d operation scripts in the Go sources; the search is broken", len(ops))
	}
	for _, e := range names {
		name := strings.TrimSuffix(e.Name(), ".lua")
		t.Run(name, func(t *testing.T) {
			s := readLua(t, name)
			var pre *luaScript
			if slices.Contains(ops, name) {
				pre = &prelude
			}
			if name != "prelude" {
				if _, ok := s.clause("Returns"); !ok {
					t.Error("its header lists no return values (\"Returns …\")")
				}
			}
			argv, ok := s.clause("ARGV:")
			if !ok {
				t.Error("its header lists no ARGV")
			}
			declared := numbers(argv)
			if pre != nil {
				pa, _ := prelude.clause("ARGV:")
				declared = append(declared, numbers(pa)...)
			}
			for _, m := range argvRef.FindAllStringSubmatch(s.body, -1) {
				if n, _ := strconv.Atoi(m[1]); !slices.Contains(declared, n) {
					t.Errorf("ARGV[%d] is not listed in the header's ARGV", n)
				}
			}
			bad := checkKeys(s, pre)
			slices.Sort(bad)
			for _, why := range slices.Compact(bad) {
				t.Error(why)
			}
		})
	}
}

// The check itself: a key built by concatenation, one passed in ARGV and
// an undeclared KEYS position are each caught; a declared discovery is not.
func TestScriptKeyCheckCatchesBuiltKeys(t *testing.T) {
	for _, tt := range []struct {
		header, body string
		bad          bool
	}{
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "redis.call('HSET', KEYS[1], 'a', ARGV[1])", false},
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "redis.call('HSET', KEYS[1] .. ':x', 'a', 1)", true},
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "redis.call('HSET', KEYS[2], 'a', 1)", true},
		{"KEYS: 1 hash. ARGV: 1 key. Returns 1.", "redis.call('DEL', ARGV[1])", true},
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "local H = KEYS[1]\nredis.call('HGET', H, 'a')", false},
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "local O = 'cs:' .. ARGV[1]\nredis.call('HGET', O, 'a')", true},
		{"KEYS: 1 hash. ARGV: 1 prefix. Discovers (O): hashes named by the index — same slot because the prefix has the tag. Returns 1.",
			"local O = ARGV[1] .. 'x'\nredis.call('HGET', O, 'a')", false},
		{"KEYS: 1 hash. ARGV: 1 prefix. Discovers (O): hashes named by the index. Returns 1.",
			"local O = ARGV[1] .. 'x'\nredis.call('HGET', O, 'a')", true},
		{"KEYS: 1 hash. ARGV: 1 id. Returns 1.", "redis.call('RENAME', KEYS[1], 'b')", true},
	} {
		bad := checkKeys(luaScript{header: tt.header, body: tt.body}, nil)
		if (len(bad) > 0) != tt.bad {
			t.Errorf("%s\n%s: problems %q, want some: %v", tt.header, tt.body, bad, tt.bad)
		}
	}
}
