package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
)

// clockFuncs are the functions of package time that read the wall clock
// or wait on it. Methods of time.Time and Duration are arithmetic and
// stay allowed.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true,
	"Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTicker": true, "NewTimer": true,
}

// ClockUses parses one Go source file of package pkg (src as
// go/parser.ParseFile takes it: nil reads filename) and returns every
// use of the clock functions of package time (called or taken as a
// value), every go statement, and a dot import of time (which would hide
// both). A local name that shadows the time import is not told apart:
// the core has none.
func ClockUses(pkg, filename string, src any) ([]ClockUse, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("clock check: %w", err)
	}
	var out []ClockUse
	at := func(p token.Pos) string {
		pos := fset.Position(p)
		return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
	}
	names := map[string]bool{}
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			out = append(out, ClockUse{Pkg: pkg, Pos: at(imp.Pos()), What: "a dot import of time"})
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && names[id.Name] && clockFuncs[n.Sel.Name] {
				out = append(out, ClockUse{Pkg: pkg, Pos: at(n.Pos()), What: "time." + n.Sel.Name})
			}
		case *ast.GoStmt:
			out = append(out, ClockUse{Pkg: pkg, Pos: at(n.Pos()), What: "a go statement"})
		}
		return true
	})
	return out, nil
}

// CheckClock runs ClockUses over the non-test files of pkgs in g.
func CheckClock(g Graph, pkgs []string) ([]ClockUse, error) {
	var out []ClockUse
	for _, p := range pkgs {
		for _, f := range g[p].GoFiles {
			uses, err := ClockUses(p, f, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, uses...)
		}
	}
	return out, nil
}
