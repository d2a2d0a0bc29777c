package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"sort"
	"strings"
)

// A mutant is one small change to one file: the bytes [Start, End) are
// replaced by New (several edits for one mutant, e.g. "!(" and ")").
type mutant struct {
	File  string // path relative to the module root
	Line  int
	Desc  string
	Edits []edit
}

type edit struct {
	Start, End int
	New        string
}

func (m mutant) String() string { return fmt.Sprintf("%s:%d: %s", m.File, m.Line, m.Desc) }

// apply returns src with m's edits made.
func (m mutant) apply(src []byte) []byte {
	es := append([]edit(nil), m.Edits...)
	sort.Slice(es, func(i, j int) bool { return es[i].Start > es[j].Start })
	out := append([]byte(nil), src...)
	for _, e := range es {
		out = append(out[:e.Start:e.Start], append([]byte(e.New), out[e.End:]...)...)
	}
	return out
}

// Comparison operators: the boundary (< to <=) and the complement (< to >=).
var (
	boundary   = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	complement = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ,
		token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR}
)

// goMutants lists the mutants of one Go source file: comparison operators
// flipped (boundary and complement), && and || swapped, if conditions
// negated, if bodies removed (the early returns and guards), boolean
// results replaced, and the integer constants 0 and 1 exchanged.
func goMutants(rel string, src []byte) ([]mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("mutate: parse %s: %w", rel, err)
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	line := func(p token.Pos) int { return fset.Position(p).Line }
	var ms []mutant
	add := func(p token.Pos, desc string, es ...edit) {
		ms = append(ms, mutant{File: rel, Line: line(p), Desc: desc, Edits: es})
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue // constants, types and package variables are left alone
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				o := off(n.OpPos)
				op := n.Op.String()
				if to, ok := boundary[n.Op]; ok {
					add(n.OpPos, fmt.Sprintf("%s -> %s", op, to), edit{o, o + len(op), to.String()})
				}
				if to, ok := complement[n.Op]; ok {
					add(n.OpPos, fmt.Sprintf("%s -> %s", op, to), edit{o, o + len(op), to.String()})
				}
				switch n.Op {
				case token.LAND:
					add(n.OpPos, "&& -> ||", edit{o, o + 2, "||"})
				case token.LOR:
					add(n.OpPos, "|| -> &&", edit{o, o + 2, "&&"})
				}
			case *ast.IfStmt:
				add(n.Cond.Pos(), "if condition negated", edit{off(n.Cond.Pos()), off(n.Cond.Pos()), "!("},
					edit{off(n.Cond.End()), off(n.Cond.End()), ")"})
				if n.Else == nil && len(n.Body.List) > 0 {
					desc := "if body removed"
					if _, ok := n.Body.List[len(n.Body.List)-1].(*ast.ReturnStmt); ok {
						desc = "early return removed"
					}
					add(n.Pos(), desc, edit{off(n.Body.Lbrace) + 1, off(n.Body.Rbrace), ""})
				}
			case *ast.ReturnStmt:
				for _, r := range n.Results {
					if id, ok := r.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
						to := map[string]string{"true": "false", "false": "true"}[id.Name]
						add(id.Pos(), fmt.Sprintf("return %s -> %s", id.Name, to), edit{off(id.Pos()), off(id.End()), to})
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.INT && (n.Value == "0" || n.Value == "1") {
					to := map[string]string{"0": "1", "1": "0"}[n.Value]
					add(n.Pos(), fmt.Sprintf("constant %s -> %s", n.Value, to), edit{off(n.Pos()), off(n.End()), to})
				}
			}
			return true
		})
	}
	return ms, nil
}

// Lua mutations are textual, on code outside comments and strings.
var (
	luaCompare = regexp.MustCompile(`==|~=|<=|>=|<|>`)
	luaLogic   = regexp.MustCompile(`\band\b|\bor\b`)
	// a one-line guard: if COND then return … end
	luaGuard = regexp.MustCompile(`^\s*if .* then return\b.*\bend\s*$`)
	// a guard's condition, for negation
	luaIf = regexp.MustCompile(`^(\s*(?:else)?if )(.*)( then\b.*)$`)
)

var luaFlip = map[string][]string{
	"==": {"~="}, "~=": {"=="}, "<": {"<=", ">="}, "<=": {"<", ">"}, ">": {">=", "<="}, ">=": {">", "<"},
}

// luaMutants lists the mutants of a Lua script: comparison operators
// flipped, and/or swapped, if conditions negated and one-line guards
// (if … then return … end) removed.
func luaMutants(rel string, src []byte) []mutant {
	var ms []mutant
	start := 0
	for i, ln := range strings.SplitAfter(string(src), "\n") {
		lineNo := i + 1
		code := luaCode(ln)
		for _, loc := range luaCompare.FindAllStringIndex(code, -1) {
			op := code[loc[0]:loc[1]]
			for _, to := range luaFlip[op] {
				ms = append(ms, mutant{File: rel, Line: lineNo, Desc: fmt.Sprintf("%s -> %s", op, to),
					Edits: []edit{{start + loc[0], start + loc[1], to}}})
			}
		}
		for _, loc := range luaLogic.FindAllStringIndex(code, -1) {
			op := code[loc[0]:loc[1]]
			to := map[string]string{"and": "or", "or": "and"}[op]
			ms = append(ms, mutant{File: rel, Line: lineNo, Desc: fmt.Sprintf("%s -> %s", op, to),
				Edits: []edit{{start + loc[0], start + loc[1], to}}})
		}
		if m := luaIf.FindStringSubmatchIndex(code); m != nil {
			ms = append(ms, mutant{File: rel, Line: lineNo, Desc: "if condition negated",
				Edits: []edit{{start + m[4], start + m[4], "not ("}, {start + m[5], start + m[5], ")"}}})
		}
		if luaGuard.MatchString(code) {
			ms = append(ms, mutant{File: rel, Line: lineNo, Desc: "early return removed",
				Edits: []edit{{start, start + len(strings.TrimRight(ln, "\n")), ""}}})
		}
		start += len(ln)
	}
	return ms
}

// luaCode blanks a line's comment and string literals (same length, so
// offsets hold), leaving the code to match.
func luaCode(ln string) string {
	b := []byte(strings.TrimRight(ln, "\n"))
	var quote byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
				continue
			}
			if c == quote {
				quote = 0
			} else {
				b[i] = ' '
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(b) && b[i+1] == '-':
			for j := i; j < len(b); j++ {
				b[j] = ' '
			}
			return string(b)
		}
	}
	return string(b)
}
