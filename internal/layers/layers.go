// Package layers states Tide's import rules (which layer may use which)
// and checks an import graph against them. The checker is pure, over a
// Graph; Load builds the Graph of the module with `go list`, and the
// package's test runs both on the repository, so `go test` fails as
// soon as a change breaks a rule. docs/architecture.md ("Layers and the
// import rules") explains the rules.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the import path of Tide's module; Rules name its packages
// relative to it.
const Module = "github.com/tide-hpc/tide"

// Package is one node of an import graph.
type Package struct {
	// Imports are the packages the non-test files import.
	Imports []string
	// TestImports are the packages the package's _test.go files import
	// (internal and external tests together); empty for packages outside
	// the module.
	TestImports []string
	// GoFiles are the paths of the non-test Go files the build selects,
	// read by the clock check; empty in synthetic graphs.
	GoFiles []string
}

// Graph maps an import path to its package. Packages a path imports but
// that are missing from the graph are leaves.
type Graph map[string]*Package

// Rule forbids the packages matched by From to import those matched by
// Forbid. A pattern is an import path, or a path ending in "/..." that
// matches that path and every path under it (as go list's patterns do).
type Rule struct {
	// Name says why, in a few words; it ends every violation message.
	Name string
	// From are the packages the rule applies to, Except those it spares.
	From, Except []string
	// Forbid are the packages they may not import.
	Forbid []string
	// Transitive: reaching a forbidden package through other packages
	// breaks the rule too, not only importing it directly.
	Transitive bool
	// Tests: the package's test files must keep the rule as well.
	Tests bool
}

// Violation is one broken rule: Pkg imports (or reaches) Forbidden.
type Violation struct {
	Pkg, Forbidden string
	// Via is the import chain from Pkg to Forbidden, both included; two
	// entries for a direct import.
	Via  []string
	Rule string
}

// String is "pkg imports forbidden (rule: name)", with the chain added
// for an indirect import. Paths inside the module are written relative
// to it.
func (v Violation) String() string {
	s := Short(v.Pkg) + " imports " + Short(v.Forbidden) + " (rule: " + v.Rule
	if len(v.Via) > 2 {
		via := make([]string, len(v.Via))
		for i, p := range v.Via {
			via[i] = Short(p)
		}
		s += "; via " + strings.Join(via, " → ")
	}
	return s + ")"
}

// Short writes a path of the module relative to it ("ctld/sched"), the
// module itself as ".", and any other path as it is.
func Short(path string) string {
	if path == Module {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, Module+"/"); ok {
		return rest
	}
	return path
}

// Match reports whether path matches one of patterns (see Rule).
func Match(path string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// Check returns every violation of rules in g, sorted by package, then
// forbidden package, then rule. A transitive rule reports each forbidden
// package a package reaches once, through a shortest chain; the chain
// ends at the first forbidden package (importing it is the violation)
// and goes through no other package the rule applies to (that one
// reports the import itself).
func Check(g Graph, rules []Rule) []Violation {
	var out []Violation
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rules {
		for _, p := range pkgs {
			if !Match(p, r.From) || Match(p, r.Except) {
				continue
			}
			out = append(out, checkPackage(g, r, p)...)
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		if c := strings.Compare(a.Pkg, b.Pkg); c != 0 {
			return c
		}
		if c := strings.Compare(a.Forbidden, b.Forbidden); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return out
}

// checkPackage walks breadth-first from p's imports (and its tests'
// when the rule says so), so that each chain found is a shortest one.
func checkPackage(g Graph, r Rule, p string) []Violation {
	var out []Violation
	parent := map[string]string{p: ""}
	var queue []string
	visit := func(from, imp string) {
		if _, seen := parent[imp]; seen {
			return
		}
		parent[imp] = from
		if Match(imp, r.Forbid) {
			var via []string
			for q := imp; q != ""; q = parent[q] {
				via = append(via, q)
			}
			slices.Reverse(via)
			out = append(out, Violation{Pkg: p, Forbidden: imp, Via: via, Rule: r.Name})
			return
		}
		// A package the rule also applies to is checked on its own: the
		// walk does not go through it, so that one bad import is
		// reported once, where it is, not again by every importer.
		if r.Transitive && (!Match(imp, r.From) || Match(imp, r.Except)) {
			queue = append(queue, imp)
		}
	}
	if pkg := g[p]; pkg != nil {
		for _, imp := range pkg.Imports {
			visit(p, imp)
		}
		if r.Tests {
			for _, imp := range pkg.TestImports {
				visit(p, imp)
			}
		}
	}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if pkg := g[q]; pkg != nil {
			for _, imp := range pkg.Imports {
				visit(q, imp)
			}
		}
	}
	return out
}

// m turns module-relative patterns into import-path patterns.
func m(rel ...string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = Module + "/" + r
	}
	return out
}

// Core are the packages of the pure scheduling core and the model it
// plans over: no I/O, no clock, no daemon (docs/architecture.md, "The
// pure scheduling core"). ctld/state is the state layer the controller
// and the simulator share, pure by its own contract.
var Core = m("ctld/sched/...", "ctld/state/...", "topology/...", "hostlist/...", "gres")

// Daemons are the packages of tidectld, tided and tide-stepd. Nothing
// under ctld/ imports the CLI, the shared client and wire types
// included: the CLI imports them, never the reverse.
var Daemons = m("ctld/...", "noded/...", "cmd/tidectld", "cmd/tided", "cmd/tide-stepd")

// NodeSeams are the packages tided is built from that stand apart from
// its agent loop (docs/architecture.md, "Runtime seam"): the job
// runtimes (noded/runtime), the srun step server (noded/steps) and the
// environment rules they share with the daemon (noded/jobenv). The
// daemon (noded) imports them, never the reverse: what they need of it
// comes in as plain values, callbacks and small interfaces.
var NodeSeams = m("noded/runtime/...", "noded/steps/...", "noded/jobenv/...")

// nodeSeamsForbidden is what NodeSeams must not reach: the daemon, the
// controller (its wire types in ctld/api excepted), the CLI and the
// mains.
var nodeSeamsForbidden = m("noded", "ctld", "ctld/client/...", "ctld/config/...", "ctld/sched/...", "ctld/state/...",
	"accounting/...", "sim/...", "cli/...", "cmd/...")

// coreForbidden is what the core must not reach: the standard library's
// process, network, database and logging packages, the accounting
// store, NVML, the runtimes (noded, containerd), the controller daemon,
// its client and configuration, the simulator and the CLI.
var coreForbidden = append([]string{
	"os/exec", "os/signal", "net", "net/http/...", "net/rpc/...", "net/smtp",
	"database/sql/...", "log", "log/slog", "log/syslog", "plugin",
	"github.com/mattn/go-sqlite3/...",
	"github.com/NVIDIA/go-nvml/...",
	"github.com/containerd/...", "github.com/opencontainers/...",
}, m("accounting/...", "gres/nvml/...", "noded/...", "ctld", "ctld/client/...", "ctld/config/...",
	"cli/...", "cmd/...", "sim/...")...)

// Rules are Tide's import rules.
var Rules = []Rule{
	{
		Name:       "the scheduling core does no I/O and reaches no store, NVML, runtime, daemon or CLI",
		From:       Core,
		Forbid:     coreForbidden,
		Transitive: true,
	},
	{
		Name:       "topology does not depend on gres",
		From:       m("topology/..."),
		Forbid:     m("gres/..."),
		Transitive: true,
	},
	{
		Name:       "a daemon does not import the CLI",
		From:       Daemons,
		Forbid:     m("cli/..."),
		Transitive: true,
		Tests:      true,
	},
	{
		Name:       "the node's runtime seam and step server reach neither the node daemon, the controller nor the CLI",
		From:       NodeSeams,
		Forbid:     nodeSeamsForbidden,
		Transitive: true,
		Tests:      true,
	},
	{
		Name:   "only gres/nvml imports go-nvml",
		From:   m("..."),
		Except: m("gres/nvml/..."),
		Forbid: []string{"github.com/NVIDIA/go-nvml/..."},
		Tests:  true,
	},
}

// CoreClosure returns the module's packages that the Core packages of g
// import, directly or not, with the Core packages themselves, sorted:
// the code the clock check reads (a helper of ctld/api that read the
// clock would make the core read it).
func CoreClosure(g Graph) []string {
	seen := map[string]bool{}
	var queue []string
	for p := range g {
		if Match(p, Core) {
			seen[p] = true
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, imp := range g[q].Imports {
			if seen[imp] || g[imp] == nil || !Match(imp, []string{Module + "/..."}) {
				continue
			}
			seen[imp] = true
			queue = append(queue, imp)
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ClockRule names the rule the clock check enforces.
const ClockRule = "the scheduling core reads no clock and starts no goroutine: now comes in as data"

// ClockUse is a read of the wall clock (or a timer, or a goroutine) in
// the core's code.
type ClockUse struct {
	Pkg  string
	Pos  string // file:line
	What string // "time.Now", "a go statement"
}

func (c ClockUse) String() string {
	return fmt.Sprintf("%s: %s uses %s (rule: %s)", c.Pos, Short(c.Pkg), c.What, ClockRule)
}
