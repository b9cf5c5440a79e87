package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// burnScript keeps the CPU busy for about a second of CPU time and holds
// 50 MB in the shell's memory (a command substitution keeps its output)
// for three seconds.
const burnScript = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done
x=$(head -c 50000000 /dev/zero | tr '\0' a)
sleep 3
echo ${#x}
`

// TestSacctUsage runs a job that burns CPU and memory and a job with two
// srun steps, then reads their usage back through sacct: the job and
// N.batch rows of the first, N, N.batch, N.0 and N.1 of the second (no
// N.extern: Tide runs no extern step), with CPU times, peak memory and
// TRES usage strings filled from what the nodes measured.
func TestSacctUsage(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 2, nodeYAML: "acct_gather_frequency: 1s\n"})

	t.Run("a job burning CPU and memory", func(t *testing.T) {
		id := c.submit("#!/bin/sh\n"+burnScript, "-o", "/dev/null")
		if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
			t.Fatalf("job %d %s %s", id, j.State, j.Exit)
		}
		rows := c.sacctRows(id, "JobID,State,TotalCPU,UserCPU,MaxRSS,MaxRSSNode,MaxRSSTask,MaxVMSize,AveRSS,TRESUsageInTot,ConsumedEnergy")
		job, batch := rows[strconv.FormatUint(id, 10)], rows[fmt.Sprintf("%d.batch", id)]
		if job == nil || batch == nil || len(rows) != 2 {
			t.Fatalf("sacct rows %v", rows)
		}
		t.Logf("job %v\nbatch %v", job, batch)
		if cpu := parseCPU(t, batch["TotalCPU"]); cpu < 300*time.Millisecond {
			t.Errorf("batch TotalCPU %q: want the loop's CPU time (at least 0.3s)", batch["TotalCPU"])
		}
		if job["TotalCPU"] != batch["TotalCPU"] || job["UserCPU"] != batch["UserCPU"] {
			t.Errorf("job row TotalCPU %q UserCPU %q, want the batch step's %q %q", job["TotalCPU"], job["UserCPU"], batch["TotalCPU"], batch["UserCPU"])
		}
		if rss := parseSize(t, batch["MaxRSS"]); rss < 45e6 {
			t.Errorf("batch MaxRSS %q: want the 50 MB the shell held", batch["MaxRSS"])
		}
		if vm := parseSize(t, batch["MaxVMSize"]); vm < 45e6 {
			t.Errorf("batch MaxVMSize %q: want at least the 50 MB the shell held (sampled every second)", batch["MaxVMSize"])
		}
		if batch["MaxRSSTask"] != "0" || !strings.HasPrefix(batch["MaxRSSNode"], "gpu0") || batch["AveRSS"] == "" {
			t.Errorf("batch MaxRSSTask %q MaxRSSNode %q AveRSS %q", batch["MaxRSSTask"], batch["MaxRSSNode"], batch["AveRSS"])
		}
		tres := batch["TRESUsageInTot"]
		for _, k := range []string{"cpu=00:00:", "energy=0", "fs/disk=", "mem=", "pages=", "vmem="} {
			if !strings.Contains(tres, k) {
				t.Errorf("TRESUsageInTot %q lacks %q", tres, k)
			}
		}
		// Usage fields stay blank on the job row, as Slurm's do.
		if job["MaxRSS"] != "" || job["TRESUsageInTot"] != "" || job["ConsumedEnergy"] != "0" {
			t.Errorf("job row %v", job)
		}
	})

	t.Run("a job with two srun steps", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(c.workDir(), "burn.sh"), []byte(burnScript), 0o644); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("#!/bin/sh\nexport PATH=%s:$PATH\nsrun -n2 sh ./burn.sh\nsrun hostname\n", binDir)
		id := c.submit(script, "-N2", "-o", "/dev/null")
		if j := c.waitTerminal(id, 90*time.Second); j.State != api.StateCompleted {
			t.Fatalf("job %d %s %s", id, j.State, j.Exit)
		}
		format := "JobID,JobName,State,ExitCode,NTasks,TotalCPU,MaxRSS,MaxRSSNode,MaxRSSTask,AveCPU,MinCPUTask,TRESUsageInMax"
		// The nodes report a step's usage with their next sync after
		// its tasks ended, shortly after srun reported the step's end.
		c.eventually(20*time.Second, "both nodes' final usage of both steps", func() bool {
			us, err := c.api.Usage(context.Background(), []uint64{id})
			n := 0
			for _, u := range us {
				if u.StepID != api.BatchStepID && u.Final && u.Nodes == 2 && u.Tasks == 2 {
					n++
				}
			}
			return err == nil && n == 2
		})
		rows := c.sacctRows(id, format)
		s0, s1 := fmt.Sprintf("%d.0", id), fmt.Sprintf("%d.1", id)
		if len(rows) != 4 || rows[fmt.Sprintf("%d.batch", id)] == nil || rows[fmt.Sprintf("%d.extern", id)] != nil {
			t.Fatalf("rows %v: want the job, its batch step and steps 0 and 1", rows)
		}
		t.Logf("rows %v", rows)
		st := rows[s0]
		if st["JobName"] != "sh" || st["State"] != "COMPLETED" || st["ExitCode"] != "0:0" || st["NTasks"] != "2" {
			t.Errorf("step 0 %v", st)
		}
		if cpu := parseCPU(t, st["TotalCPU"]); cpu < 600*time.Millisecond {
			t.Errorf("step 0 TotalCPU %q: want two tasks' loops (at least 0.6s)", st["TotalCPU"])
		}
		if rss := parseSize(t, st["MaxRSS"]); rss < 45e6 {
			t.Errorf("step 0 MaxRSS %q: want the 50 MB a task held", st["MaxRSS"])
		}
		if n := st["MaxRSSNode"]; n != "gpu01" && n != "gpu02" {
			t.Errorf("step 0 MaxRSSNode %q", n)
		}
		if k := st["MaxRSSTask"]; k != "0" && k != "1" {
			t.Errorf("step 0 MaxRSSTask %q", k)
		}
		if st["AveCPU"] == "" || !strings.Contains(st["TRESUsageInMax"], "mem=") {
			t.Errorf("step 0 AveCPU %q TRESUsageInMax %q", st["AveCPU"], st["TRESUsageInMax"])
		}
		if rows[s1]["JobName"] != "hostname" || rows[s1]["State"] != "COMPLETED" {
			t.Errorf("step 1 %v", rows[s1])
		}
		// The job's CPU time sums its ended steps'.
		job := rows[strconv.FormatUint(id, 10)]
		if parseCPU(t, job["TotalCPU"]) < parseCPU(t, st["TotalCPU"]) {
			t.Errorf("job TotalCPU %q below step 0's %q", job["TotalCPU"], st["TotalCPU"])
		}
	})

	t.Run("--jobs and --clusters", func(t *testing.T) {
		id := c.submit("#!/bin/sh\ntrue\n", "-o", "/dev/null")
		c.waitTerminal(id, 60*time.Second)
		want := fmt.Sprintf("%d|COMPLETED|0:0", id)
		// Another cluster is read from a shared PostgreSQL store (this
		// one holds none: it adds no jobs); an SQLite store holds this
		// cluster alone and refuses to name another.
		shared := c.storeURL != ""
		ms := []string{"it", "all"}
		if shared {
			ms = append(ms, "other,it")
		}
		for _, m := range ms {
			r := c.cli("sacct", "--jobs", fmt.Sprint(id), "--clusters", m, "-X", "-P", "-n", "--format=JobID,State,ExitCode")
			if r.code != 0 || strings.TrimSpace(r.out) != want {
				t.Errorf("sacct -M %s: %q (exit %d, %q), want %q", m, r.out, r.code, r.err, want)
			}
		}
		r := c.cli("sacct", "-j", fmt.Sprint(id), "-M", "other", "-X", "-P", "-n")
		const refusal = "sacct: error: load accounting data: cluster other: the accounting store is SQLite: " +
			"it holds only cluster it; several clusters need a shared PostgreSQL store"
		switch {
		case shared && (r.code != 0 || r.out != ""):
			t.Errorf("sacct -M other: %q (exit %d, %q), want nothing", r.out, r.code, r.err)
		case !shared && (r.code != 1 || r.out != "" || strings.TrimSpace(r.err) != refusal):
			t.Errorf("sacct -M other: %q (exit %d, %q), want exit 1 and %q", r.out, r.code, r.err, refusal)
		}
	})
}

// sacctRows runs sacct -P for job id with format and returns each row's
// fields by name, keyed by JobID.
func (c *cluster) sacctRows(id uint64, format string) map[string]map[string]string {
	c.t.Helper()
	r := c.cli("sacct", "-j", fmt.Sprint(id), "-P", "--format="+format)
	if r.code != 0 {
		c.t.Fatalf("sacct: exit %d: %s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	names := strings.Split(lines[0], "|")
	out := map[string]map[string]string{}
	for _, l := range lines[1:] {
		vals := strings.Split(l, "|")
		m := map[string]string{}
		for i, n := range names {
			if i < len(vals) {
				m[n] = vals[i]
			}
		}
		out[m["JobID"]] = m
	}
	return out
}

// parseCPU reads sacct's CPU time: [D-]HH:MM:SS or MM:SS.mmm.
func parseCPU(t *testing.T, s string) time.Duration {
	t.Helper()
	var d, h, m int
	var sec float64
	rest := s
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		d, _ = strconv.Atoi(rest[:i])
		rest = rest[i+1:]
	}
	parts := strings.Split(rest, ":")
	var err error
	switch len(parts) {
	case 3:
		h, _ = strconv.Atoi(parts[0])
		m, _ = strconv.Atoi(parts[1])
		sec, err = strconv.ParseFloat(parts[2], 64)
	case 2:
		m, _ = strconv.Atoi(parts[0])
		sec, err = strconv.ParseFloat(parts[1], 64)
	default:
		err = fmt.Errorf("no colon")
	}
	if err != nil {
		t.Fatalf("CPU time %q: %v", s, err)
	}
	return time.Duration(d)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec*float64(time.Second))
}

// parseSize reads sacct's sizes: a number with an optional K, M, G, T
// suffix (powers of 1024).
func parseSize(t *testing.T, s string) float64 {
	t.Helper()
	mult := 1.0
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return v * mult
}
