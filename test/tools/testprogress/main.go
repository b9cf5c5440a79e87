// Command testprogress runs `go test -json` and prints what a person
// (or a CI log) wants to see while it runs: one line per package as it
// finishes, in the order they finish; for a package that runs long
// (the integration tests), a line every -every saying how far it is;
// while nothing has finished yet (the first build), a line saying so;
// the output of every failed test and of every build failure; and a
// summary. It is `make test`'s filter: go test's own output is silent
// until a package ends, and -v floods the log.
//
//	go run ./test/tools/testprogress -- go test -json -count=1 ./...
//
// It exits with the command's exit status, or 1 when a test failed and
// the command still said 0.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	every := flag.Duration("every", 30*time.Second, "report a package still running (or a build not done) this often")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testprogress [-every 30s] -- go test -json [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *every, os.Stdout, os.Stderr))
}

// run runs argv, filters its JSON, and returns the exit status.
func run(argv []string, every time.Duration, out, errOut io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = errOut
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(errOut, "testprogress:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(errOut, "testprogress:", err)
		return 1
	}
	r := newReporter(out, time.Now, modulePath())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.tick(every)
			}
		}
	}()
	r.read(pipe)
	close(stop)
	wg.Wait()
	werr := cmd.Wait()
	r.summary()
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		return max(ee.ExitCode(), 1)
	case werr != nil:
		fmt.Fprintln(errOut, "testprogress:", werr)
		return 1
	case r.failed():
		return 1
	}
	return 0
}

// modulePath is the module of the current directory's go.mod, which
// package names are printed relative to ("" when there is none).
func modulePath() string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}

// event is one line of `go test -json` (cmd/test2json), including the
// build events of Go 1.24 on.
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// pkgState is what the reporter knows of a package under way.
type pkgState struct {
	start                 time.Time
	passed, failed, skips int
	// running maps the top-level tests under way to their start.
	running map[string]time.Time
	// output holds the package's own output and each test's, until the
	// test passes (then dropped) or fails (then printed).
	output map[string][]string
}

// reporter turns events into lines. Its methods are safe for the
// reading goroutine and the ticker at once.
type reporter struct {
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
	module string
	begin  time.Time
	// last is when the reporter last printed a line.
	last     time.Time
	pkgs     map[string]*pkgState
	builds   map[string][]string // build output by ImportPath
	ok, fail []string
	noTests  int
	finished int
}

func newReporter(w io.Writer, now func() time.Time, module string) *reporter {
	t := now()
	return &reporter{w: w, now: now, module: module, begin: t, last: t, pkgs: map[string]*pkgState{}, builds: map[string][]string{}}
}

// name is a package's import path relative to the module: ./sim.
func (r *reporter) name(pkg string) string {
	if r.module != "" {
		if pkg == r.module {
			return "."
		}
		if rest, ok := strings.CutPrefix(pkg, r.module+"/"); ok {
			return "./" + rest
		}
	}
	return pkg
}

func (r *reporter) printf(format string, args ...any) {
	fmt.Fprintf(r.w, format, args...)
	r.last = r.now()
}

// read consumes the command's output; a line that is not an event is
// printed as it is.
func (r *reporter) read(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			r.mu.Lock()
			r.printf("%s\n", line)
			r.mu.Unlock()
			continue
		}
		r.handle(e)
	}
}

func (r *reporter) handle(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Action {
	case "build-output":
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		return
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkgState{start: r.now(), running: map[string]time.Time{}, output: map[string][]string{}}
		r.pkgs[e.Package] = p
	}
	top := e.Test != "" && !strings.Contains(e.Test, "/")
	switch e.Action {
	case "output":
		p.output[e.Test] = append(p.output[e.Test], e.Output)
	case "run":
		if top {
			p.running[e.Test] = r.now()
		}
	case "pass", "skip", "fail":
		if e.Test == "" {
			r.endPackage(e, p)
			return
		}
		if e.Action == "fail" {
			r.printFailure(e, p)
		}
		delete(p.output, e.Test)
		if top {
			delete(p.running, e.Test)
			switch e.Action {
			case "pass":
				p.passed++
			case "skip":
				p.skips++
			case "fail":
				p.failed++
			}
		}
	}
}

// printFailure prints a failed test's output, without go test's
// "=== RUN" bookkeeping lines.
func (r *reporter) printFailure(e event, p *pkgState) {
	r.printf("--- FAIL %s %s (%.1fs)\n", r.name(e.Package), e.Test, e.Elapsed)
	for _, l := range p.output[e.Test] {
		if strings.HasPrefix(l, "=== ") || strings.HasPrefix(strings.TrimSpace(l), "--- FAIL: "+e.Test+" (") {
			continue
		}
		r.printf("    %s", l)
		if !strings.HasSuffix(l, "\n") {
			r.printf("\n")
		}
	}
}

// endPackage prints a package's line, and what a failed package said
// outside its tests (a panic, a TestMain's error, a build failure).
func (r *reporter) endPackage(e event, p *pkgState) {
	delete(r.pkgs, e.Package)
	name := r.name(e.Package)
	switch e.Action {
	case "skip":
		r.noTests++
		return
	case "pass":
		r.ok = append(r.ok, name)
	case "fail":
		r.fail = append(r.fail, name)
	}
	r.finished++
	status := "ok  "
	if e.Action == "fail" {
		status = "FAIL"
	}
	extra := ""
	if p.skips > 0 {
		extra = fmt.Sprintf("  (%d skipped)", p.skips)
	}
	if e.FailedBuild != "" {
		extra = "  [build failed]"
	}
	r.printf("%s %-40s %7.1fs%s\n", status, name, e.Elapsed, extra)
	if e.Action != "fail" {
		return
	}
	if e.FailedBuild != "" {
		for _, l := range r.builds[e.FailedBuild] {
			r.printf("    %s", l)
		}
		return
	}
	for _, l := range p.output[""] {
		// The package's closing "FAIL" lines repeat the line above.
		if l == "FAIL\n" || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "ok  \t") {
			continue
		}
		r.printf("    %s", l)
	}
}

// tick reports, when nothing was printed for every, the packages that
// have run for longer than that, or that nothing has finished yet.
func (r *reporter) tick(every time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.last) < every {
		return
	}
	var long []string
	for pkg, p := range r.pkgs {
		if now.Sub(p.start) >= every {
			long = append(long, pkg)
		}
	}
	sort.Strings(long)
	if len(long) == 0 {
		if r.finished == 0 && len(r.pkgs) == 0 {
			r.printf("... building the tests (%s so far; the first build takes a few minutes)\n", round(now.Sub(r.begin)))
		}
		return
	}
	for _, pkg := range long {
		p := r.pkgs[pkg]
		line := fmt.Sprintf("... %s: %d passed", r.name(pkg), p.passed)
		if p.failed > 0 {
			line += fmt.Sprintf(", %d failed", p.failed)
		}
		if p.skips > 0 {
			line += fmt.Sprintf(", %d skipped", p.skips)
		}
		if len(p.running) > 0 {
			names := make([]string, 0, len(p.running))
			for n := range p.running {
				names = append(names, n)
			}
			// The longest-running first: the one to look at if it hangs.
			slices.SortFunc(names, func(a, b string) int { return p.running[a].Compare(p.running[b]) })
			shown := names[:min(len(names), 3)]
			for i, n := range shown {
				shown[i] = fmt.Sprintf("%s (%s)", n, round(now.Sub(p.running[n])))
			}
			line += "; running " + strings.Join(shown, ", ")
			if len(names) > 3 {
				line += fmt.Sprintf(" and %d more", len(names)-3)
			}
		} else if p.passed+p.failed+p.skips == 0 {
			line += " (building or in TestMain)"
		}
		r.printf("%s; %s so far\n", line, round(now.Sub(p.start)))
	}
}

// plural is "1 package", "2 packages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// round keeps durations readable: whole seconds.
func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// summary prints the packages that failed and the totals.
func (r *reporter) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	took := round(r.now().Sub(r.begin))
	if len(r.fail) > 0 {
		r.printf("FAIL: %d of %s failed in %s: %s\n", len(r.fail), plural(len(r.fail)+len(r.ok), "package"), took, strings.Join(r.fail, " "))
		return
	}
	r.printf("ok: %s passed in %s (%d without tests)\n", plural(len(r.ok), "package"), took, r.noTests)
}

func (r *reporter) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fail) > 0
}
