package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A documented command line is split into words the way a POSIX shell
// splits the forms our docs use: words, '…' and "…" quoting, backslash
// escapes, $VAR and ${VAR} from the exports before it, $(…) (run by bash),
// and a trailing # comment. Pipes, redirections and command lists are
// refused: a documented countersign line is one simple command.

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// shellWords splits line; env resolves $VAR.
func shellWords(line string, env map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	r := []rune(line)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			j := indexRune(r, i+1, '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(string(r[i+1 : j]))
			inWord, i = true, j
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(r) {
					return nil, fmt.Errorf("unterminated \" in %q", line)
				}
				if r[i] == '"' {
					break
				}
				if r[i] == '\\' && i+1 < len(r) && strings.ContainsRune(`"\$`+"`", r[i+1]) {
					i++
					cur.WriteRune(r[i])
					continue
				}
				if r[i] == '$' {
					v, n, err := expand(r[i:], env)
					if err != nil {
						return nil, err
					}
					cur.WriteString(v)
					i += n - 1
					continue
				}
				cur.WriteRune(r[i])
			}
		case c == '\\':
			if i+1 < len(r) {
				i++
				cur.WriteRune(r[i])
				inWord = true
			}
		case c == '$':
			v, n, err := expand(r[i:], env)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			inWord, i = true, i+n-1
		case strings.ContainsRune("|;&<>`", c):
			return nil, fmt.Errorf("%q is not one simple command (it has %q)", line, c)
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

func indexRune(r []rune, from int, c rune) int {
	for i := from; i < len(r); i++ {
		if r[i] == c {
			return i
		}
	}
	return -1
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// expand reads one $… expansion at the start of r; it returns the value
// and how many runes it took.
func expand(r []rune, env map[string]string) (string, int, error) {
	s := string(r)
	switch {
	case strings.HasPrefix(s, "$("):
		j := indexRune(r, 2, ')')
		if j < 0 {
			return "", 0, fmt.Errorf("unterminated $( in %q", s)
		}
		out, err := exec.Command("bash", "-c", string(r[2:j])).Output()
		if err != nil {
			return "", 0, fmt.Errorf("$(%s): %v", string(r[2:j]), err)
		}
		return strings.TrimRight(string(out), "\n"), j + 1, nil
	case strings.HasPrefix(s, "${"):
		j := indexRune(r, 2, '}')
		if j < 0 {
			return "", 0, fmt.Errorf("unterminated ${ in %q", s)
		}
		return env[string(r[2:j])], j + 1, nil
	}
	name := nameRE.FindString(s[1:])
	if name == "" {
		return "$", 1, nil
	}
	return env[name], 1 + len([]rune(name)), nil
}

// splitCommand separates leading VAR=value assignments from the command.
func splitCommand(words []string) (assign map[string]string, cmd []string) {
	assign = map[string]string{}
	for i, w := range words {
		if !assignRE.MatchString(w) {
			return assign, words[i:]
		}
		k, v, _ := strings.Cut(w, "=")
		assign[k] = v
	}
	return assign, nil
}

func TestShellWords(t *testing.T) {
	env := map[string]string{"K": "devkey"}
	for _, c := range []struct {
		line string
		want []string
	}{
		{`A=1 countersign ops list --status draft  # a comment`, []string{"A=1", "countersign", "ops", "list", "--status", "draft"}},
		{`countersign ops reconcile op_x --note "it's \"done\"" --outcome failed`, []string{"countersign", "ops", "reconcile", "op_x", "--note", `it's "done"`, "--outcome", "failed"}},
		{`countersign check-config --input '{"a": [1, 2]}' f.yaml`, []string{"countersign", "check-config", "--input", `{"a": [1, 2]}`, "f.yaml"}},
		{`export X='smtp://u:p@h:587?from=a@b' Y="k:$K" Z=$(echo hi)`, []string{"export", "X=smtp://u:p@h:587?from=a@b", "Y=k:devkey", "Z=hi"}},
		{`COUNTERSIGN_API_KEY=cs_… countersign mcp`, []string{"COUNTERSIGN_API_KEY=cs_…", "countersign", "mcp"}},
	} {
		got, err := shellWords(c.line, env)
		if err != nil || strings.Join(got, "\x00") != strings.Join(c.want, "\x00") {
			t.Errorf("shellWords(%s) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{`countersign completion bash > /etc/x`, `countersign keygen | tee k`, `countersign serve; rm -rf x`, `countersign 'x`} {
		if _, err := shellWords(bad, env); err == nil {
			t.Errorf("shellWords(%s) accepted", bad)
		}
	}
}
