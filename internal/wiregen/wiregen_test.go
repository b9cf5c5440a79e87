package wiregen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule makes a module in a temporary directory with the given
// files (path → source) and returns its directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGenerateRefuses: what the generator cannot mirror exactly is an
// error naming the problem, never a codec that drifts from
// encoding/json.
func TestGenerateRefuses(t *testing.T) {
	tests := []struct {
		name string
		src  string // declares T, the root
		want string
	}{
		{"interface", `type T struct{ X any }`, "not one the generator handles"},
		{"float32", `type T struct{ X float32 }`, "not one the generator handles"},
		{"channel", `type T struct{ X chan int }`, "not one the generator handles"},
		{"function", `type T struct{ X func() }`, "not one the generator handles"},
		{"byte slice", `type T struct{ X []byte }`, "base64"},
		{"array", `type T struct{ X [3]int }`, "arrays are not handled"},
		{"map key", `type K struct{ A int }; type T struct{ X map[K]int }`, "map key type K"},
		{"outside module", "import \"net\"\ntype T struct{ X net.IP }", "outside the module"},
		{"anonymous struct", `type T struct{ X struct{ A int } }`, "anonymous struct"},
		{"recursive", `type T struct{ Next *T }`, "recursive"},
		{"MarshalJSON", "type U struct{ A int }\nfunc (U) MarshalJSON() ([]byte, error) { return nil, nil }\ntype T struct{ X U }", "MarshalJSON method"},
		{"UnmarshalText on pointer", "type U string\nfunc (*U) UnmarshalText([]byte) error { return nil }\ntype T struct{ X U }", "UnmarshalText method"},
		{"promoted MarshalJSON", "type U struct{ A int }\nfunc (U) MarshalJSON() ([]byte, error) { return nil, nil }\ntype T struct{ U }", "MarshalJSON method"},
		{"string option", "type T struct{ X int `json:\"x,string\"` }", `tag option "string"`},
		{"unknown option", "type T struct{ X int `json:\"x,inline\"` }", `tag option "inline"`},
		{"odd key", "type T struct{ X int `json:\"a b\"` }", "JSON name"},
		{"key needing escapes", "type T struct{ X int `json:\"<x>\"` }", "JSON name"},
		{"shadowed", "type A struct{ X int `json:\"x\"` }\ntype T struct{ A; Y int `json:\"x\"` }", "shadowing"},
		{"duplicate tag", "type T struct{ X int `json:\"x\"`; Y int `json:\"x\"` }", "shadowing"},
		{"embedded pointer", `type A struct{ X int }; type T struct{ *A }`, "embedded pointer"},
		{"embedded non-struct", `type A []int; type T struct{ A }`, "not a struct"},
		{"embedded time", "import \"time\"\ntype T struct{ time.Time }", "embedded time.Time"},
		{"omitzero struct", "type A struct{ X []int }\ntype T struct{ Y A `json:\"y,omitzero\"` }", "omitzero on a struct"},
		{"ambiguous IsZero", "type A struct{ X int }\nfunc (A) IsZero() bool { return true }\ntype B struct{ Y int }\nfunc (B) IsZero() bool { return true }\ntype T struct{ A; B }", "ambiguous"},
		{"generic", `type G[P any] struct{ X P }; type T struct{ Y G[int] }`, "not one the generator handles"},
		{"missing type", `type T struct{ X Missing }`, "not one the generator handles"},
		{"not a struct", `type T []int`, "not a struct type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModule(t, map[string]string{"p/p.go": "package p\n\n" + tc.src + "\n"})
			_, err := Generate(Config{Dir: filepath.Join(dir, "p"), Out: "p_gen.go", Encode: []string{"T"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestGenerateAcrossPackages: types of another package of the module
// are spelled with its name and imported; the generated file itself is
// not read, so a stale one (here: one that does not even parse) does
// not stand in the way.
func TestGenerateAcrossPackages(t *testing.T) {
	dir := writeModule(t, map[string]string{
		"q/q.go": "package q\n\ntype S struct {\n\tN int `json:\"n\"`\n}\n\ntype Word string\n",
		"p/p.go": "package p\n\nimport (\n\t\"time\"\n\n\tqq \"example.com/m/q\"\n)\n\n" +
			"type T struct {\n\tS  []qq.S `json:\"s\"`\n\tW  qq.Word `json:\"w\"`\n\tAt *time.Time `json:\"at,omitzero\"`\n}\n",
		"p/p_gen.go": "this is not Go",
	})
	cfg := Config{Dir: filepath.Join(dir, "p"), Out: "p_gen.go", Encode: []string{"T"}, Decode: []Root{{Type: "T", Mode: ModeWhole}}}
	src, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		Header, "package p", `"example.com/m/q"`, `"time"`, "func appendJSONQS(b []byte, v *q.S) []byte",
		"jsonfast.ReadString(d, &v.W)", "new(time.Time)", "v.At != nil && !v.At.IsZero()",
		"func decodeJSONT(data []byte, v *T) error", "jsonfast.Whole",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated file lacks %q:\n%s", want, src)
		}
	}
	again, err := Generate(cfg)
	if err != nil || !bytes.Equal(src, again) {
		t.Errorf("a second run differs (%v)", err)
	}
}

func TestCheckDirective(t *testing.T) {
	files := map[string]string{
		"p/p.go": "package p\n\n//go:generate go run ../../internal/wiregen/cmd/wiregen -out p_gen.go -encode T -decode T:strict\n\n" +
			"type T struct {\n\tA int `json:\"a\"`\n}\n",
	}
	dir := writeModule(t, files)
	pdir := filepath.Join(dir, "p")
	if err := CheckDirective(pdir); err == nil || !strings.Contains(err.Error(), "go generate") {
		t.Fatalf("missing generated file: error %v, want one telling to run go generate", err)
	}
	cfg, err := ParseArgs([]string{"-out", "p_gen.go", "-encode", "T", "-decode", "T:strict"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = pdir
	src, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "p_gen.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDirective(pdir); err != nil {
		t.Fatalf("current file: %v", err)
	}
	// A field added without go generate.
	grown := strings.Replace(files["p/p.go"], "\tA int `json:\"a\"`\n", "\tA int `json:\"a\"`\n\tB string `json:\"b,omitempty\"`\n", 1)
	if err := os.WriteFile(filepath.Join(pdir, "p.go"), []byte(grown), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDirective(pdir); err == nil || !strings.Contains(err.Error(), "run go generate ./...") {
		t.Fatalf("stale file: error %v, want one telling to run go generate", err)
	}
	// No directive at all.
	if err := CheckDirective(filepath.Join(dir)); err == nil || !strings.Contains(err.Error(), "no //go:generate") {
		t.Fatalf("no directive: error %v", err)
	}
}

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-out", "x_gen.go", "-encode", "A, B", "-decode", "A:stream,C,D:whole"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Dir: ".", Out: "x_gen.go", Encode: []string{"A", "B"},
		Decode: []Root{{"A", ModeStream}, {"C", ModeNone}, {"D", ModeWhole}}}
	if cfg.Out != want.Out || strings.Join(cfg.Encode, ",") != "A,B" || len(cfg.Decode) != 3 ||
		cfg.Decode[0] != want.Decode[0] || cfg.Decode[1] != want.Decode[1] || cfg.Decode[2] != want.Decode[2] {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
	for _, args := range [][]string{
		{"-encode", "A"},                 // no -out
		{"-out", "x.go", "-encode", "A"}, // not _gen.go
		{"-out", "d/x_gen.go", "-encode", "A"},
		{"-out", "x_gen.go"}, // nothing to generate
		{"-out", "x_gen.go", "-decode", "A:lenient"},
		{"-out", "x_gen.go", "-encode", "A", "extra"},
		{"-bogus"},
	} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) took it", args)
		}
	}
}
