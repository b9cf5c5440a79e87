package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
func stable(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "sched time/pass") {
			keep = append(keep, l)
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
		{name: "compare on one node", args: []string{"--trace", tr, "--nodes", "1", "--leaf", "0", "--compare", "fifo,backfill,tide"}, golden: "one-node"},
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

func TestConvert(t *testing.T) {
	in := "JobID|Submit|Start|End|Elapsed|AllocTRES|User|Account|State\n" +
		"7|2024-03-01T10:00:00|2024-03-01T10:00:30|2024-03-01T10:10:30|00:10:00|cpu=8,gres/gpu=2|alice|vision|COMPLETED\n" +
		"8|2024-03-01T10:01:00|Unknown|Unknown|00:00:00|cpu=1|bob|nlp|PENDING\n"
	f, buf := clitest.Factory(&clitest.FakeAPI{}, nil)
	buf.In.WriteString(in)
	out, errOut, code := clitest.Run(NewCmd(f), buf, "tide sim", []string{"convert", "--tz", "UTC"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "job_id,submit_time,start_time,end_time,duration,num_gpus,gpu_share,user,queue,status\n" +
		"7,0,30,630,600,2,1.0,alice,vision,COMPLETED\n" +
		"8,60,,,,0,1.0,bob,nlp,PENDING\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
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
