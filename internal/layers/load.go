package layers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
)

// listed is the part of `go list -json` that Load reads.
type listed struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	CgoFiles     []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	DepOnly      bool
	Error        *struct{ Err string }
}

// Load returns the import graph of the packages matching patterns and
// everything they import (standard library and other modules included),
// as `go list -deps` under the go command gobin sees them, run in dir.
// Test imports are kept for the matched packages only. A package that
// go list cannot load is an error naming it: a rule cannot be checked
// over a graph with holes.
func Load(ctx context.Context, gobin, dir string, patterns ...string) (Graph, error) {
	args := append([]string{"list", "-e", "-deps",
		"-json=ImportPath,Dir,GoFiles,CgoFiles,Imports,TestImports,XTestImports,DepOnly,Error"}, patterns...)
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
	}
	g := Graph{}
	var errs []error
	dec := json.NewDecoder(&stdout)
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if l.Error != nil {
			errs = append(errs, fmt.Errorf("%s: %s", l.ImportPath, l.Error.Err))
			continue
		}
		p := &Package{Imports: l.Imports}
		for _, f := range append(l.GoFiles, l.CgoFiles...) {
			p.GoFiles = append(p.GoFiles, filepath.Join(l.Dir, f))
		}
		if !l.DepOnly {
			p.TestImports = append(append([]string(nil), l.TestImports...), l.XTestImports...)
		}
		g[l.ImportPath] = p
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("go list could not load every package: %w", errors.Join(errs...))
	}
	return g, nil
}
