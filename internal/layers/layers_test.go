package layers

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// graph builds a Graph from "pkg: imp imp ..." lines; a path written
// tide/x is Module/x. A line "pkg [test]: ..." adds test imports.
func graph(lines ...string) Graph {
	expand := func(p string) string {
		if rest, ok := strings.CutPrefix(p, "tide/"); ok {
			return Module + "/" + rest
		}
		return p
	}
	g := Graph{}
	for _, l := range lines {
		head, imps, _ := strings.Cut(l, ":")
		name, test := strings.CutSuffix(strings.TrimSpace(head), " [test]")
		name = expand(name)
		if g[name] == nil {
			g[name] = &Package{}
		}
		for _, imp := range strings.Fields(imps) {
			if test {
				g[name].TestImports = append(g[name].TestImports, expand(imp))
			} else {
				g[name].Imports = append(g[name].Imports, expand(imp))
			}
		}
	}
	return g
}

// clean is a small Tide that keeps every rule, with the edges each rule
// allows next to the ones it forbids: the controller uses the store, the
// network and the core; tided reaches go-nvml through gres/nvml; the
// CLI uses the client; topology reads files.
var clean = []string{
	"tide/ctld: tide/ctld/sched tide/ctld/state tide/accounting tide/ctld/client net/http time log/slog",
	"tide/ctld/state: tide/ctld/sched tide/ctld/api",
	"tide/ctld/sched: tide/ctld/api tide/hostlist tide/topology sort time",
	"tide/ctld/sched [test]: os/exec tide/internal/golden",
	"tide/ctld/api: tide/gres net/url time",
	"tide/ctld/client: tide/ctld/api net net/http",
	"tide/topology: tide/hostlist os go.yaml.in/yaml/v3",
	"tide/gres: os",
	"tide/gres/nvml: tide/gres github.com/NVIDIA/go-nvml/pkg/nvml",
	"tide/gres/nvml [test]: github.com/NVIDIA/go-nvml/pkg/nvml/mock",
	"tide/accounting: tide/ctld/api database/sql github.com/mattn/go-sqlite3",
	"tide/noded: tide/ctld/client tide/gres/nvml tide/noded/ctr tide/noded/runtime tide/noded/steps tide/internal/image os/exec",
	"tide/noded/runtime: tide/ctld/api tide/noded/ctr tide/noded/stepd github.com/containerd/containerd/v2/client",
	"tide/noded/runtime [test]: tide/noded/stepd",
	"tide/noded/steps: tide/ctld/api tide/internal/stepio net",
	"tide/noded/stepd: tide/ctld/api",
	"tide/noded/ctr: github.com/containerd/containerd/v2/client",
	"tide/internal/image: tide/noded/ctr",
	"tide/cmd/tided: tide/noded",
	"tide/cmd/tidectld: tide/ctld",
	"tide/cli/cmdutil: tide/cli/getopt tide/ctld/client",
	"tide/cli/squeue: tide/cli/cmdutil tide/ctld/api",
	"tide/cmd/tide: tide/cli/squeue",
	"net/http: net crypto/tls",
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock: github.com/NVIDIA/go-nvml/pkg/nvml",
}

func TestCheck(t *testing.T) {
	core := "the scheduling core does no I/O and reaches no store, NVML, runtime, daemon or CLI"
	seams := "the node's runtime seam and step server reach neither the node daemon, the controller nor the CLI"
	tests := []struct {
		name string
		add  []string // lines added to clean
		want []string
	}{
		{name: "clean", want: nil},
		{name: "core runs a process",
			add:  []string{"tide/ctld/sched: os/exec"},
			want: []string{"ctld/sched imports os/exec (rule: " + core + ")"}},
		{name: "core reaches the network through the wire types",
			add: []string{"tide/ctld/api: net/http"},
			want: []string{
				"ctld/sched imports net/http (rule: " + core + "; via ctld/sched → ctld/api → net/http)",
				"ctld/state imports net/http (rule: " + core + "; via ctld/state → ctld/api → net/http)",
			}},
		{name: "core reaches the accounting store",
			add:  []string{"tide/ctld/sched: tide/internal/helper", "tide/internal/helper: tide/accounting"},
			want: []string{"ctld/sched imports accounting (rule: " + core + "; via ctld/sched → internal/helper → accounting)"}},
		{name: "core imports NVML",
			add:  []string{"tide/ctld/state: tide/gres/nvml"},
			want: []string{"ctld/state imports gres/nvml (rule: " + core + ")"}},
		{name: "core imports the runtime",
			add:  []string{"tide/ctld/state: tide/noded/ctr"},
			want: []string{"ctld/state imports noded/ctr (rule: " + core + ")"}},
		{name: "core imports the daemon",
			add:  []string{"tide/ctld/state: tide/ctld"},
			want: []string{"ctld/state imports ctld (rule: " + core + ")"}},
		{name: "core logs",
			add:  []string{"tide/hostlist: log/slog"},
			want: []string{"hostlist imports log/slog (rule: " + core + ")"}},
		{name: "topology imports gres",
			add:  []string{"tide/topology: tide/gres"},
			want: []string{"topology imports gres (rule: topology does not depend on gres)"}},
		{name: "topology reaches gres",
			add: []string{"tide/topology/topotest: tide/topology tide/ctld/api"},
			want: []string{
				"topology/topotest imports gres (rule: topology does not depend on gres; via topology/topotest → ctld/api → gres)",
			}},
		{name: "tided imports the CLI",
			add:  []string{"tide/noded: tide/cli/cmdutil"},
			want: []string{"noded imports cli/cmdutil (rule: a daemon does not import the CLI)"}},
		{name: "tided reaches the CLI through a shared package",
			add:  []string{"tide/internal/image: tide/cli/cmdutil"},
			want: []string{"noded imports cli/cmdutil (rule: a daemon does not import the CLI; via noded → internal/image → cli/cmdutil)"}},
		{name: "the controller's client imports the CLI",
			add:  []string{"tide/ctld/client: tide/cli/getopt"},
			want: []string{"ctld/client imports cli/getopt (rule: a daemon does not import the CLI)"}},
		{name: "a daemon's main imports the CLI",
			add:  []string{"tide/cmd/tide-stepd: tide/noded/stepd tide/cli/root"},
			want: []string{"cmd/tide-stepd imports cli/root (rule: a daemon does not import the CLI)"}},
		{name: "a daemon's test imports the CLI",
			add:  []string{"tide/noded/ctr [test]: tide/cli/cmdutil"},
			want: []string{"noded/ctr imports cli/cmdutil (rule: a daemon does not import the CLI)"}},
		{name: "the runtime imports the daemon",
			add:  []string{"tide/noded/runtime: tide/noded"},
			want: []string{"noded/runtime imports noded (rule: " + seams + ")"}},
		{name: "the step server reaches the controller",
			add:  []string{"tide/noded/steps: tide/internal/helper", "tide/internal/helper: tide/ctld"},
			want: []string{"noded/steps imports ctld (rule: " + seams + "; via noded/steps → internal/helper → ctld)"}},
		{name: "the step server's test imports the daemon",
			add:  []string{"tide/noded/steps [test]: tide/noded"},
			want: []string{"noded/steps imports noded (rule: " + seams + ")"}},
		{name: "the runtime imports the CLI",
			add: []string{"tide/noded/runtime/fakes: tide/cli/cmdutil"},
			want: []string{
				"noded/runtime/fakes imports cli/cmdutil (rule: a daemon does not import the CLI)",
				"noded/runtime/fakes imports cli/cmdutil (rule: " + seams + ")",
			}},
		{name: "the core imports the runtime seam",
			add:  []string{"tide/ctld/state: tide/noded/runtime"},
			want: []string{"ctld/state imports noded/runtime (rule: " + core + ")"}},
		{name: "go-nvml outside gres/nvml",
			add:  []string{"tide/noded: github.com/NVIDIA/go-nvml/pkg/nvml"},
			want: []string{"noded imports github.com/NVIDIA/go-nvml/pkg/nvml (rule: only gres/nvml imports go-nvml)"}},
		{name: "go-nvml mocks in another package's test",
			add:  []string{"tide/sim [test]: github.com/NVIDIA/go-nvml/pkg/nvml/mock"},
			want: []string{"sim imports github.com/NVIDIA/go-nvml/pkg/nvml/mock (rule: only gres/nvml imports go-nvml)"}},
		{name: "go-nvml under gres/nvml",
			add:  []string{"tide/gres/nvml/nvmltest: github.com/NVIDIA/go-nvml/pkg/nvml/mock"},
			want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, v := range Check(graph(append(append([]string(nil), clean...), tt.add...)...), Rules) {
				got = append(got, v.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		path    string
		pattern string
		want    bool
	}{
		{"net", "net", true},
		{"net/http", "net", false},
		{"net/http", "net/http/...", true},
		{"net/http/httptest", "net/http/...", true},
		{"net/httpx", "net/http/...", false},
		{Module + "/ctld", Module + "/ctld", true},
		{Module + "/ctld/api", Module + "/ctld", false},
		{Module + "/gres", Module + "/gres/nvml/...", false},
		{Module, Module + "/...", true},
	}
	for _, tt := range tests {
		if got := Match(tt.path, []string{tt.pattern}); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.path, tt.pattern, got, tt.want)
		}
	}
}

func TestClockUses(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{name: "arithmetic on times is fine", src: `package p
import "time"
func f(now, t time.Time, d time.Duration) bool { return now.Sub(t) > d && t.Add(time.Hour).Before(time.Unix(0, 0)) }`},
		{name: "no time import", src: `package p
func f(time struct{ Now func() int }) int { return time.Now() }`},
		{name: "time.Now", src: `package p
import "time"
func f() time.Time { return time.Now() }`, want: []string{"p.go:3: p uses time.Now"}},
		{name: "Since and Until", src: `package p
import "time"
func f(t time.Time) bool {
	return time.Since(t) > time.Until(t)
}`, want: []string{"p.go:4: p uses time.Since", "p.go:4: p uses time.Until"}},
		{name: "the clock as a value", src: `package p
import "time"
var clock = time.Now`, want: []string{"p.go:3: p uses time.Now"}},
		{name: "renamed import", src: `package p
import tm "time"
func f() { tm.Sleep(tm.Second) }`, want: []string{"p.go:3: p uses time.Sleep"}},
		{name: "timers", src: `package p
import "time"
func f() { <-time.After(1); time.NewTimer(1) }`, want: []string{"p.go:3: p uses time.After", "p.go:3: p uses time.NewTimer"}},
		{name: "dot import", src: `package p
import . "time"
var d = Second`, want: []string{"p.go:2: p uses a dot import of time"}},
		{name: "goroutine", src: `package p
func f() { go func() {}() }`, want: []string{"p.go:2: p uses a go statement"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uses, err := ClockUses("p", "p.go", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range uses {
				s, ok := strings.CutSuffix(u.String(), " (rule: "+ClockRule+")")
				if !ok {
					t.Fatalf("%q does not name the rule", u.String())
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("clock uses (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ClockUses("p", "p.go", "package p\nfunc {"); err == nil {
		t.Error("a file that does not parse gave no error")
	}
}

// TestRepository checks the rules on Tide itself: the import graph as
// go list sees it, and the clock in the core's files.
func TestRepository(t *testing.T) {
	// go test puts its own GOROOT/bin first on PATH, so this is the go
	// command that is running the test.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := Load(ctx, gobin, ".", Module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	// A rule whose patterns match nothing would pass for ever: each must
	// apply to packages that exist, and the forbidden side of each must
	// name something real too.
	for _, r := range Rules {
		if !anyMatch(g, r.From) {
			t.Errorf("rule %q: no package matches From %v", r.Name, r.From)
		}
	}
	for _, must := range []string{"ctld/sched", "ctld/api", "topology", "gres", "gres/nvml", "noded", "cmd/tided", "cli/getopt", "accounting"} {
		if g[Module+"/"+must] == nil {
			t.Errorf("go list did not report %s", must)
		}
	}
	if g["github.com/NVIDIA/go-nvml/pkg/nvml"] == nil {
		t.Error("go list did not report go-nvml: the NVML rule checks nothing")
	}
	for _, v := range Check(g, Rules) {
		t.Error(v)
	}

	closure := CoreClosure(g)
	for _, must := range []string{"ctld/sched", "ctld/api", "topology", "hostlist", "gres"} {
		if !strings.Contains(" "+strings.Join(closure, " ")+" ", " "+Module+"/"+must+" ") {
			t.Errorf("the clock check does not read %s (closure %v)", must, closure)
		}
	}
	uses, err := CheckClock(g, closure)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uses {
		t.Error(u)
	}
}

func anyMatch(g Graph, patterns []string) bool {
	for p := range g {
		if Match(p, patterns) {
			return true
		}
	}
	return false
}
