package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// declaredCodes parses the package's Go files and returns the string
// value of every constant declared with type typ, by constant name. It
// also returns the names of constants that look like codes of that
// kind (named prefix…, a string literal) but are untyped: each of them
// is a code that skipped its type, and with it the table check.
func declaredCodes(t *testing.T, typ, prefix string) (codes map[string]string, untyped []string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes = map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			// In a const block a spec without type and values repeats
			// the previous one's.
			var specType ast.Expr
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if vs.Type != nil || len(vs.Values) > 0 {
					specType = vs.Type
				}
				typed := false
				if id, ok := specType.(*ast.Ident); ok && id.Name == typ {
					typed = true
				}
				for k, n := range vs.Names {
					var lit *ast.BasicLit
					if k < len(vs.Values) {
						lit, _ = vs.Values[k].(*ast.BasicLit)
					}
					switch {
					case typed && lit == nil:
						t.Errorf("%s: %s %s is not a string literal: the test cannot read its word", fset.Position(n.Pos()), typ, n.Name)
					case typed:
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatalf("%s: %v", fset.Position(n.Pos()), err)
						}
						codes[n.Name] = v
					case strings.HasPrefix(n.Name, prefix) && lit != nil && lit.Kind == token.STRING:
						untyped = append(untyped, n.Name)
					}
				}
			}
		}
	}
	return codes, untyped
}

// TestReasonTable checks that every ReasonCode constant declared in the
// package has exactly one row in reasonTable, every row a declared
// constant, and a help text, so that a new code cannot skip the table.
func TestReasonTable(t *testing.T) {
	declared, untyped := declaredCodes(t, "ReasonCode", "Reason")
	if len(untyped) > 0 {
		t.Errorf("untyped reason constants %v: declare them as ReasonCode and give them a row in reasonTable", untyped)
	}
	rows := map[ReasonCode]int{}
	for _, in := range reasonTable {
		rows[in.Code]++
		if got := in.Code.Info(); got != in {
			t.Errorf("%s.Info() = %+v, want its row %+v", in.Code, got, in)
		}
		if in.Help == "" {
			t.Errorf("reason %s has no help text", in.Code)
		}
		if in.Blocks && !in.WaitsInLine {
			t.Errorf("reason %s blocks the fifo line but does not wait in line", in.Code)
		}
		if in.Reclaims && !(in.WaitsInLine && in.Sharing) {
			t.Errorf("reason %s reclaims but is not a sharing reason that waits in line", in.Code)
		}
	}
	words := map[string]bool{}
	for name, word := range declared {
		words[word] = true
		switch rows[ReasonCode(word)] {
		case 0:
			t.Errorf("%s (%q) has no row in reasonTable", name, word)
		case 1:
		default:
			t.Errorf("%s (%q) has %d rows in reasonTable", name, word, rows[ReasonCode(word)])
		}
	}
	for code := range rows {
		if !words[string(code)] {
			t.Errorf("reasonTable row %q is no declared ReasonCode constant", code)
		}
	}
}

// TestDetailTable is TestReasonTable for DetailCode and detailTable.
func TestDetailTable(t *testing.T) {
	declared, untyped := declaredCodes(t, "DetailCode", "Detail")
	if len(untyped) > 0 {
		t.Errorf("untyped detail constants %v: declare them as DetailCode and give them a row in detailTable", untyped)
	}
	rows := map[DetailCode]int{}
	for _, in := range detailTable {
		rows[in.Code]++
		if got := in.Code.Info(); got != in {
			t.Errorf("%s.Info() = %+v, want its row %+v", in.Code, got, in)
		}
		if in.Help == "" {
			t.Errorf("detail %s has no help text", in.Code)
		}
	}
	words := map[string]bool{}
	for name, word := range declared {
		words[word] = true
		if n := rows[DetailCode(word)]; n != 1 {
			t.Errorf("%s (%q) has %d rows in detailTable, want 1", name, word, n)
		}
	}
	for code := range rows {
		if !words[string(code)] {
			t.Errorf("detailTable row %q is no declared DetailCode constant", code)
		}
	}
}

// TestReasonAttributes pins the codes each attribute holds: they are
// the lists the scheduler and the CLI switched over before the table
// (waitsInLine, the fifo policy's blocking reasons, the reclaim pair,
// jobfmt.SharingReason, the dependency pair), so a changed row is a
// deliberate change of behaviour.
func TestReasonAttributes(t *testing.T) {
	tests := []struct {
		name string
		has  func(ReasonCode) bool
		want []ReasonCode
	}{
		{name: "waits in line", has: ReasonCode.WaitsInLine, want: []ReasonCode{
			ReasonResources, ReasonPriority, ReasonTopology, ReasonQuotaExceeded,
			ReasonUserLimit, ReasonWaitingForReclaim, ReasonPreempting, ReasonNodeDown}},
		{name: "blocks", has: ReasonCode.Blocks, want: []ReasonCode{ReasonResources, ReasonTopology, ReasonPriority}},
		{name: "reclaims", has: ReasonCode.Reclaims, want: []ReasonCode{ReasonWaitingForReclaim, ReasonPreempting}},
		{name: "sharing", has: ReasonCode.Sharing, want: []ReasonCode{
			ReasonQuotaExceeded, ReasonUserLimit, ReasonWaitingForReclaim, ReasonPreempting,
			ReasonQOSTimeLimit, ReasonBuffered}},
		{name: "dependency", has: ReasonCode.Dependency, want: []ReasonCode{ReasonDependency, ReasonDependencyNeverSatisfied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[ReasonCode]bool{}
			for _, c := range tt.want {
				want[c] = true
			}
			got := map[ReasonCode]bool{}
			for _, in := range Reasons() {
				if tt.has(in.Code) {
					got[in.Code] = true
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReasonInfo(t *testing.T) {
	tests := []struct {
		name  string
		code  ReasonCode
		known bool
		want  ReasonInfo
	}{
		{name: "known", code: ReasonUserLimit, known: true, want: ReasonInfo{Code: ReasonUserLimit,
			WaitsInLine: true, Sharing: true, Help: "a per-user limit of its queue (running jobs, GPUs) is reached"}},
		{name: "Slurm's word", code: ReasonTimeLimit, known: true, want: ReasonInfo{Code: ReasonTimeLimit,
			Slurm: true, Ends: true, Help: "it ran into its time limit (TIMEOUT)"}},
		// A record of a newer controller: no attribute, nothing breaks.
		{name: "unknown", code: "FutureReason", want: ReasonInfo{Code: "FutureReason"}},
		{name: "empty", code: "", want: ReasonInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.code.Info()); diff != "" {
				t.Errorf("Info (-want +got):\n%s", diff)
			}
			if got := tt.code.Known(); got != tt.known {
				t.Errorf("Known = %v, want %v", got, tt.known)
			}
		})
	}
}

func TestDetailInfo(t *testing.T) {
	if got := DetailNodeFeatures.Info(); got.Code != DetailNodeFeatures || !strings.Contains(got.Help, "--constraint") {
		t.Errorf("NodeFeatures: %+v", got)
	}
	if got, want := DetailCode("FutureDetail").Info(), (DetailInfo{Code: "FutureDetail"}); got != want {
		t.Errorf("unknown detail: %+v, want %+v", got, want)
	}
}

// TestReasonsCopies checks that callers cannot change the tables through
// the slices they get.
func TestReasonsCopies(t *testing.T) {
	r := Reasons()
	r[0].WaitsInLine = !r[0].WaitsInLine
	if reasonTable[0].WaitsInLine == r[0].WaitsInLine {
		t.Error("Reasons returned the table itself")
	}
	d := Details()
	d[0].Help = "changed"
	if detailTable[0].Help == "changed" {
		t.Error("Details returned the table itself")
	}
}

// BenchmarkReasonLookup measures the per-pending-job lookups of a pass:
// a common code (found first) and a rare one (near the end).
func BenchmarkReasonLookup(b *testing.B) {
	for _, code := range []ReasonCode{ReasonPriority, ReasonResources, ReasonGPUMemReclaim, "Unknown"} {
		b.Run(string(code), func(b *testing.B) {
			// A code read from a record is not the constant's string.
			c := ReasonCode(strings.Clone(string(code)))
			n := 0
			for b.Loop() {
				if c.WaitsInLine() {
					n++
				}
			}
			_ = n
		})
	}
}
