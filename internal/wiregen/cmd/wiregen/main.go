// Command wiregen writes a package's generated JSON codecs (see package
// internal/wiregen). It runs from a go:generate line in the package,
// in the package's directory:
//
//	//go:generate go run ../../internal/wiregen/cmd/wiregen -out wirejson_gen.go -encode T1,T2 -decode T1:strict,T3
//
// -encode gives each listed struct an AppendJSON method; -decode gives
// each a reader and, with a mode (stream, strict or whole: how the
// document falls back to encoding/json), a decodeJSON<T> function.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tide-hpc/tide/internal/wiregen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, err := wiregen.ParseArgs(args)
	if err != nil {
		return err
	}
	src, err := wiregen.Generate(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.Dir, cfg.Out), src, 0o644)
}
