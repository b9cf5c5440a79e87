package sim

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goldenpkg "github.com/tide-hpc/tide/internal/golden"

	"github.com/tide-hpc/tide/cli/clitest"
)

// small is a trace for command tests: one node's worth of jobs.
const small = `job_id,submit_time,start_time,end_time,duration,num_gpus,gpu_share,user,queue,status
A,0,,,100,4,1.0,,q1,
B,10,,,50,8,1.0,,q1,
C,20,,,30,2,1.0,,q2,
D,30,,,10,32,1.0,,q2,
E,40,,,10,1,0.25,,q1,
F,41,,,10,1,0.5,,q1,
`

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	f, buf := clitest.Factory(&clitest.FakeAPI{}, nil)
	return clitest.Run(NewCmd(f), buf, "tide sim", args)
}

// stable drops the wall-clock rows, which differ from run to run.
// The pass times still size the table's columns, so a slow machine
// widens them: each line's runs of spaces become one.
func stable(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "sched time/pass") {
			keep = append(keep, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(keep, "\n")
}

func TestSim(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.csv")
	if err := os.WriteFile(tr, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		golden string
		code   int
		errOut string
	}{
		{name: "compare on one node, exact estimates", args: []string{"--trace", tr, "--nodes", "1", "--leaf", "0", "--compare", "fifo,backfill,tide",
			"--estimates", "exact"}, golden: "one-node"},
		{name: "compare on one node, modelled estimates (the default)", args: []string{"--trace", tr, "--nodes", "1", "--leaf", "0",
			"--compare", "fifo,backfill,tide"}, golden: "one-node-model"},
		{name: "bad estimates", args: []string{"--trace", tr, "--estimates", "guess"}, code: 2, errOut: `--estimates "guess": want exact, limit or model`},
		{name: "three seeds, medians and ranges", args: []string{"--trace", tr, "--nodes", "1", "--leaf", "0", "--compare", "fifo,backfill",
			"--seeds", "1-3", "--starve-bound", "60"}, golden: "seeds"},
		{name: "seed and seeds", args: []string{"--trace", tr, "--seed", "2", "--seeds", "1-3"}, code: 2, errOut: "--seed and --seeds exclude each other"},
		{name: "bad seeds", args: []string{"--trace", tr, "--seeds", "3-1"}, code: 2, errOut: `--seeds: "3-1" is not a range`},
		{name: "packing takes one seed", args: []string{"--trace", tr, "--pack", "--seeds", "1-2"}, code: 2, errOut: "--pack replays one seed"},
		{name: "bad starve bound", args: []string{"--trace", tr, "--starve-bound", "0"}, code: 2, errOut: "--starve-bound"},
		{name: "packing, best fit against first fit", args: []string{"--trace", tr, "--nodes", "2", "--leaf", "0", "--pack", "--compare", "tide,tide+firstfit"}, golden: "pack"},
		{name: "packing has no html", args: []string{"--trace", tr, "--pack", "--html", "x.html"}, code: 2, errOut: "--pack prints a table"},
		{name: "no trace", args: []string{}, code: 2, errOut: "--trace is required"},
		{name: "bad policy", args: []string{"--trace", tr, "--compare", "lottery"}, code: 2, errOut: "unknown policy"},
		{name: "bad window", args: []string{"--trace", tr, "--window", "5"}, code: 2, errOut: "--window"},
		{name: "queue map to a missing partition", args: []string{"--trace", tr, "--queue-map", "q1=debug"}, code: 2, errOut: "no partition debug"},
		{name: "missing file", args: []string{"--trace", filepath.Join(dir, "nope.csv")}, code: 1, errOut: "read trace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if tc.errOut != "" && !strings.Contains(errOut, tc.errOut) {
				t.Errorf("stderr %q lacks %q", errOut, tc.errOut)
			}
			if tc.golden != "" {
				goldenpkg.Check(t, tc.golden, stable(strings.ReplaceAll(out, tr, "small.csv")))
			}
		})
	}
}

// TestStarveDeprecated keeps the old --starve working, as --starve-bound.
func TestStarveDeprecated(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.csv")
	if err := os.WriteFile(tr, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "--trace", tr, "--nodes", "1", "--leaf", "0", "--compare", "fifo", "--starve", "90")
	if code != 0 || !strings.Contains(out, "starved (waited > 90s)") || !strings.Contains(errOut, "--starve-bound") {
		t.Errorf("exit %d, stdout %q, stderr %q: want the bound applied and a deprecation note", code, out, errOut)
	}
}

// fakeClock is a clock that tests move.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestProgress feeds the bar updates a fake clock apart: no ETA in the
// first seconds, then the time left at the rate so far, redraws only
// when the percentage moves or a second passed, and a closing line
// that pads over the longer bar.
func TestProgress(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var b strings.Builder
	p := newProgress(&b, clk.now)
	bar := func(pct int) string {
		return "[" + strings.Repeat("#", pct*20/100) + strings.Repeat(".", 20-pct*20/100) + "]"
	}
	steps := []struct {
		after       time.Duration
		done, total int
		want        string // "" when nothing is drawn
	}{
		{0, 0, 1000, "\rsimulating " + bar(0) + "   0% (0/1000 job runs)"},
		{time.Second, 100, 1000, "\rsimulating " + bar(10) + "  10% (100/1000 job runs)"},
		{100 * time.Millisecond, 105, 1000, ""}, // same percentage, too soon
		{2 * time.Second, 250, 1000, "\rsimulating " + bar(25) + "  25% (250/1000 job runs), ETA 9s"},
		{1500 * time.Millisecond, 259, 1000, "\rsimulating " + bar(25) + "  25% (259/1000 job runs), ETA 13s"},
		// One space pads over the longer "ETA 13s".
		{5 * time.Minute, 999, 1000, "\rsimulating " + bar(99) + "  99% (999/1000 job runs), ETA 0s "},
		{time.Second, 1000, 1000, "\rsimulating " + bar(100) + " 100% (1000/1000 job runs)" + strings.Repeat(" ", len(", ETA 0s")-1)},
	}
	for _, st := range steps {
		clk.t = clk.t.Add(st.after)
		b.Reset()
		p.update(st.done, st.total)
		if b.String() != st.want {
			t.Errorf("update(%d, %d) after %v drew %q, want %q", st.done, st.total, st.after, b.String(), st.want)
		}
	}
	b.Reset()
	p.done()
	want := "\rsimulated 1000 job runs in 5m06s" // 305.6 s
	want += strings.Repeat(" ", len("simulating "+bar(100)+" 100% (1000/1000 job runs)")-len(want)+1) + "\n"
	if b.String() != want {
		t.Errorf("done drew %q, want %q", b.String(), want)
	}
}

func TestFormatETA(t *testing.T) {
	for d, want := range map[time.Duration]string{
		400 * time.Millisecond: "0s", 45 * time.Second: "45s", 185 * time.Second: "3m05s", 3720 * time.Second: "1h02m",
	} {
		if got := formatETA(d); got != want {
			t.Errorf("formatETA(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestProgressOnTerminalOnly: the bar draws on a terminal (here a fake
// one), never with --quiet, and never in a pipe.
func TestProgressOnTerminalOnly(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.csv")
	if err := os.WriteFile(tr, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--trace", tr, "--nodes", "1", "--leaf", "0", "--compare", "fifo"}
	for _, tc := range []struct {
		name     string
		terminal bool
		quiet    bool
		want     bool
	}{
		{name: "terminal", terminal: true, want: true},
		{name: "terminal, --quiet", terminal: true, quiet: true},
		{name: "pipe", terminal: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(f func(io.Writer) bool) { stderrIsTerminal = f }(stderrIsTerminal)
			stderrIsTerminal = func(io.Writer) bool { return tc.terminal }
			a := args
			if tc.quiet {
				a = append(slices.Clone(args), "--quiet")
			}
			out, errOut, code := run(t, a...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(errOut, "simulated "); got != tc.want {
				t.Errorf("progress shown: %v, want %v (stderr %q)", got, tc.want, errOut)
			}
			if strings.Contains(out, "simulat") {
				t.Errorf("progress on stdout: %q", out)
			}
		})
	}
}

func TestSimWritesReports(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.csv")
	os.WriteFile(tr, []byte(small), 0o644)
	j1, j2, html := filepath.Join(dir, "1.json"), filepath.Join(dir, "2.json"), filepath.Join(dir, "r.html")
	for _, j := range []string{j1, j2} {
		if _, errOut, code := run(t, "--trace", tr, "--nodes", "2", "--json", j, "--html", html, "--seed", "7"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	}
	a, _ := os.ReadFile(j1)
	b, _ := os.ReadFile(j2)
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("JSON reports differ or are empty (%d, %d bytes)", len(a), len(b))
	}
	h, _ := os.ReadFile(html)
	if !strings.Contains(string(h), "<svg") {
		t.Errorf("HTML report has no chart")
	}
}

// sacctDump is a sacct -P -X dump with the rows real accounting holds:
// a GPU job, one that never started, a zero-length NODE_FAIL, a running
// job, a CPU-only job and a row that cannot be read.
const sacctDump = "JobID|Submit|Start|End|Elapsed|Timelimit|AllocTRES|User|Account|Partition|State\n" +
	"7|2024-03-01T10:00:00|2024-03-01T10:00:30|2024-03-01T10:10:30|00:10:00|01:00:00|cpu=8,gres/gpu=2|alice|vision|gpu|COMPLETED\n" +
	"8|2024-03-01T10:01:00|Unknown|Unknown|00:00:00|UNLIMITED|cpu=1|bob|nlp|gpu|PENDING\n" +
	"9|2024-03-01T10:02:00|2024-03-01T10:02:00|2024-03-01T10:02:00|00:00:00|30|cpu=8,gres/gpu=8|carol|nlp|gpu|NODE_FAIL\n" +
	"10|2024-03-01T10:03:00|2024-03-01T10:05:00|Unknown|00:20:00|02:00:00|cpu=16,gres/gpu=4|dave|nlp|gpu|RUNNING\n" +
	"11|2024-03-01T10:04:00|2024-03-01T10:04:00|2024-03-01T10:09:00|00:05:00|10:00|cpu=48|erin|chem|cpu|COMPLETED\n" +
	"12|2024-03-01T10:04:00|2024-03-01T10:04:00|2024-03-01T10:09:00|00:05:00|10:00|gres/gpu=one|frank|chem|cpu|COMPLETED\n"

func TestConvert(t *testing.T) {
	wantTrace := "job_id,submit_time,start_time,end_time,duration,num_gpus,gpu_share,user,queue,status,time_limit,num_cpus,censored\n" +
		"7,0,30,630,600,2,1.0,alice,gpu,COMPLETED,3600,8,0\n" +
		"8,60,,,,0,1.0,bob,gpu,PENDING,,1,1\n" +
		"9,120,120,120,0,8,1.0,carol,gpu,NODE_FAIL,1800,8,0\n" +
		"10,180,300,,1200,4,1.0,dave,gpu,RUNNING,7200,16,1\n" +
		"11,240,240,540,300,0,1.0,erin,cpu,COMPLETED,600,48,0\n"
	tests := []struct {
		name    string
		args    []string
		in      string
		code    int
		out     string
		errOut  []string
		noErrOr string
	}{
		{name: "bad row reported and left out", args: []string{"convert", "--tz", "UTC"}, in: sacctDump, out: wantTrace,
			errOut: []string{"stdin:7: AllocTRES: gres/gpu=\"one\" is not a GPU count (row left out)", "left out 1 bad row(s) of 6"}},
		{name: "strict fails on the bad row", args: []string{"convert", "--tz", "UTC", "--strict"}, in: sacctDump, code: 1,
			errOut: []string{"stdin:7: AllocTRES"}},
		{name: "queue from the account", args: []string{"convert", "--tz", "UTC", "--queue-from", "account"},
			in: strings.SplitAfterN(sacctDump, "\n", 3)[0] + strings.SplitAfterN(sacctDump, "\n", 3)[1],
			out: "job_id,submit_time,start_time,end_time,duration,num_gpus,gpu_share,user,queue,status,time_limit,num_cpus\n" +
				"7,0,30,630,600,2,1.0,alice,vision,COMPLETED,3600,8\n"},
		{name: "bad queue source", args: []string{"convert", "--queue-from", "qos"}, in: sacctDump, code: 2, errOut: []string{"--queue-from \"qos\""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, buf := clitest.Factory(&clitest.FakeAPI{}, nil)
			buf.In.WriteString(tc.in)
			out, errOut, code := clitest.Run(NewCmd(f), buf, "tide sim", tc.args)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			if tc.code == 0 && out != tc.out {
				t.Errorf("got\n%s\nwant\n%s", out, tc.out)
			}
			for _, w := range tc.errOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

// TestConvertedDumpReplays converts the dump and replays the trace: the
// zero-length job runs and ends at once, the running one is censored,
// the CPU-only one keeps its 48 CPUs, the pending one is skipped.
func TestConvertedDumpReplays(t *testing.T) {
	dir := t.TempDir()
	dump, tr, js := filepath.Join(dir, "history.sacct"), filepath.Join(dir, "history.csv"), filepath.Join(dir, "r.json")
	if err := os.WriteFile(dump, []byte(sacctDump), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "convert", "--tz", "UTC", "-o", tr, dump); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errOut)
	}
	for _, est := range []string{"exact", "limit", "model"} {
		out, errOut, code := run(t, "--trace", tr, "--nodes", "1", "--cpus-per-node", "64", "--leaf", "0",
			"--compare", "fifo,backfill", "--estimates", est, "--json", js)
		if code != 0 {
			t.Fatalf("replay --estimates %s: exit %d: %s", est, code, errOut)
		}
		if b, err := os.ReadFile(js); err != nil || !strings.Contains(string(b), `"censored": 1,`) ||
			!strings.Contains(string(b), `"mode": "`+est+`"`) {
			t.Errorf("--estimates %s: JSON report lacks the censored job or the mode (%v)", est, err)
		}
		for _, want := range []string{"jobs 5: 4 completed, 0 rejected (never fit), 1 skipped (no duration), 0 unfinished",
			"censored 1: unfinished in the trace"} {
			if !strings.Contains(out, want) {
				t.Errorf("--estimates %s: report lacks %q:\n%s", est, want, out)
			}
		}
	}
}

// simConfig is a controller config for --config: two partitions (q1 the
// default over both nodes, q2 on one) under two leaf switches.
const simConfig = `version: 1
nodes:
  - {names: "n[1-2]", cpus: 64, memory: 512G, gpus: 8}
partitions:
  - {name: q1, nodes: "n[1-2]"}
  - {name: q2, nodes: n2, max_time: "1-0"}
topology:
  switches:
    - {name: s1, nodes: n1}
    - {name: s2, nodes: n2}
    - {name: top, switches: "s[1-2]"}
scheduler: {policy: fifo}
`

func TestSimConfig(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.csv")
	cfg := filepath.Join(dir, "tide.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for p, s := range map[string]string{tr: small, cfg: simConfig, bad: "version: 1\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		args   []string
		golden string
		code   int
		errOut string
	}{
		{name: "config cluster and policy", args: []string{"--trace", tr, "--config", cfg, "--compare", "fifo,backfill,config"}, golden: "config"},
		{name: "config excludes the generator", args: []string{"--trace", tr, "--config", cfg, "--nodes", "4", "--leaf", "0"},
			code: 2, errOut: "--config and --nodes, --leaf exclude each other"},
		{name: "config policy needs a config", args: []string{"--trace", tr, "--compare", "config"}, code: 2, errOut: `policy "config" needs --config`},
		{name: "invalid config", args: []string{"--trace", tr, "--config", bad}, code: 2, errOut: "at least one partition"},
		{name: "missing config", args: []string{"--trace", tr, "--config", filepath.Join(dir, "nope.yaml")}, code: 1, errOut: "read config"},
		{name: "queue map lists the partitions", args: []string{"--trace", tr, "--config", cfg, "--queue-map", "q1=debug"},
			code: 2, errOut: "no partition debug (have q1, q2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if tc.errOut != "" && !strings.Contains(errOut, tc.errOut) {
				t.Errorf("stderr %q lacks %q", errOut, tc.errOut)
			}
			if tc.golden != "" {
				goldenpkg.Check(t, tc.golden, stable(strings.ReplaceAll(out, tr, "small.csv")))
			}
		})
	}
}
