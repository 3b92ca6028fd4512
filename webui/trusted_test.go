package webui

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustedMarkupOnlyFromTheGraph: the web UI's code converts a value to
// markup.Trusted in one place, the graph builder, which escapes its label.
// Everywhere else trusted markup is a string constant (which needs no
// conversion), so a value from data cannot reach a page unescaped.
func TestTrustedMarkupOnlyFromTheGraph(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]int{"throughput.go": 1}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Trusted" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "markup" {
					n++
					if n > allowed[name] {
						t.Errorf("%s: markup.Trusted conversion: trusted markup must be a constant", fset.Position(call.Pos()))
					}
				}
			}
			return true
		})
		if n < allowed[name] {
			t.Errorf("%s: expected %d markup.Trusted conversion(s), found %d: update this test", name, allowed[name], n)
		}
	}
}
