package approval

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"testing"
)

// The store keeps what it is given; the service decides which previews it
// leaves out and renders them back. A Store method that writes or returns
// an operation and is not wrapped by previewing would store a preview the
// service meant to leave out, or hand out an operation without its preview.
func TestPreviewingWrapsEveryOperationPort(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "previewstore.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && ast.IsExported(fd.Name.Name) {
			if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok && id.Name == "previewing" {
				wrapped = append(wrapped, fd.Name.Name)
			}
		}
	}
	store := reflect.TypeFor[Store]()
	var carrying []string
	for m := range store.Methods() {
		if carriesOperation(m.Type, map[reflect.Type]bool{}) {
			carrying = append(carrying, m.Name)
		}
	}
	slices.Sort(wrapped)
	if !slices.Equal(carrying, wrapped) {
		t.Fatalf("Store methods that write or return an operation: %v\npreviewing wraps: %v", carrying, wrapped)
	}
	if len(carrying) < 10 {
		t.Fatalf("found only %v: the search for operations in signatures is broken", carrying)
	}
}

// carriesOperation reports whether a value of t holds an *Operation (in a
// slice, a struct field, a func's results or arguments).
func carriesOperation(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == reflect.TypeFor[*Operation]() {
		return true
	}
	if seen[t] || t == reflect.TypeFor[Operation]() {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
		return carriesOperation(t.Elem(), seen)
	case reflect.Struct:
		for f := range t.Fields() {
			if carriesOperation(f.Type, seen) {
				return true
			}
		}
	case reflect.Func:
		for p := range t.Ins() {
			if carriesOperation(p, seen) {
				return true
			}
		}
		for r := range t.Outs() {
			if carriesOperation(r, seen) {
				return true
			}
		}
	}
	return false
}
