package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestRequests covers issue 22's resource requests on one two-node
// cluster (8 GPUs and 64 CPUs each; partitions gpu over both nodes and
// short over gpu01): GPU totals that span nodes, per-task GPUs,
// partition lists, --tasks-per-node, every output pattern letter, the
// launch's grace for an output directory created after sbatch returns,
// and squeue --start.
func TestRequests(t *testing.T) {
	c := newCluster(t, 2)
	wd := c.workDir()

	t.Run("gpus total spans nodes", func(t *testing.T) {
		id := c.submit("#!/bin/sh\necho $SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST\n", "--gpus=16", "-o", "span-%j.out", "-t", "1:00")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted || len(j.Alloc) != 2 || len(j.Alloc[0].GPUs) != 8 || len(j.Alloc[1].GPUs) != 8 {
			t.Fatalf("--gpus=16: %s on %+v, want COMPLETED with 8 GPUs on each of 2 nodes", j.State, j.Alloc)
		}
		if got := readOut(t, filepath.Join(wd, fmt.Sprintf("span-%d.out", id))); got != "2 gpu[01-02]\n" {
			t.Errorf("job saw %q", got)
		}
		r := c.cli("sbatch", "--gpus=17", "--wrap", "true")
		if r.code == 0 || !strings.Contains(r.err, "Requested node configuration is not available") {
			t.Errorf("--gpus=17 on 16 GPUs: exit %d, %s", r.code, r.err)
		}
		r = c.cli("sbatch", "--gpus=12", "--gpus-per-node=8", "--wrap", "true")
		if r.code == 0 || !strings.Contains(r.err, "--gpus=12 is not a multiple of --gpus-per-node=8") {
			t.Errorf("--gpus=12 --gpus-per-node=8: exit %d, %s", r.code, r.err)
		}
	})

	t.Run("gpus per task", func(t *testing.T) {
		id := c.submit("#!/bin/sh\ntrue\n", "-n4", "--gpus-per-task=1", "-t", "1:00")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted || len(j.Alloc) != 1 || j.Alloc[0].Tasks != 4 || len(j.Alloc[0].GPUs) != 4 {
			t.Fatalf("-n4 --gpus-per-task=1: %s on %+v, want 4 tasks with 4 GPUs on one node", j.State, j.Alloc)
		}
		a := j.Alloc[0]
		seen := map[int]bool{}
		for _, g := range j.TaskGPUs(&a) {
			for _, x := range g {
				if seen[x] {
					t.Errorf("GPU %d given to two tasks: %v", x, j.TaskGPUs(&a))
				}
				seen[x] = true
			}
		}
		if len(seen) != 4 {
			t.Errorf("task GPUs %v, want one GPU for each of the 4 tasks", j.TaskGPUs(&a))
		}
		// --gpus with --gpus-per-task gives the task count.
		id = c.submit("#!/bin/sh\necho $SLURM_NTASKS\n", "--gpus=6", "--gpus-per-task=2", "-o", "gpt-%j.out", "-t", "1:00")
		if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateCompleted || j.Tasks != 3 || len(j.Alloc[0].GPUs) != 6 {
			t.Errorf("--gpus=6 --gpus-per-task=2: %s, %d tasks, %+v", j.State, j.Tasks, j.Alloc)
		}
	})

	t.Run("tasks-per-node", func(t *testing.T) {
		id := c.submit("#!/bin/sh\ntrue\n", "-N2", "--tasks-per-node=3", "-t", "1:00")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted || len(j.Alloc) != 2 || j.Alloc[0].Tasks != 3 || j.Alloc[1].Tasks != 3 {
			t.Errorf("-N2 --tasks-per-node=3: %s on %+v", j.State, j.Alloc)
		}
	})

	t.Run("partition list", func(t *testing.T) {
		// Pending (held), the job shows its list.
		held := c.submit("#!/bin/sh\ntrue\n", "-p", "short,gpu", "-H", "-t", "0:20")
		r := c.cli("squeue", "-h", "-j", fmt.Sprint(held), "-o", "%P %T")
		if strings.TrimSpace(r.out) != "short,gpu PENDING" {
			t.Errorf("squeue of the held job: %q %s", r.out, r.err)
		}
		if r := c.cli("squeue", "-h", "-p", "gpu", "-o", "%i"); !strings.Contains(r.out, fmt.Sprint(held)) {
			t.Errorf("squeue -p gpu misses the pending job of short,gpu: %q", r.out)
		}
		c.cli("scontrol", "release", fmt.Sprint(held))
		if j := c.waitTerminal(held, 30*time.Second); j.Partition != "short" || j.BatchHost() != "gpu01" {
			t.Errorf("released: ran in %q on %s, want short (the first listed) on gpu01", j.Partition, j.BatchHost())
		}
		// short's only node busy: the job runs in gpu, on gpu02.
		busy := c.submit("#!/bin/sh\nsleep 300\n", "-p", "short", "--gpus=8", "-t", "0:30")
		c.waitState(busy, api.StateRunning, 30*time.Second)
		id := c.submit("#!/bin/sh\ntrue\n", "-p", "short,gpu", "--gpus=4", "-t", "0:20")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted || j.Partition != "gpu" || j.BatchHost() != "gpu02" {
			t.Errorf("with short full: %s in %q on %s, want COMPLETED in gpu on gpu02", j.State, j.Partition, j.BatchHost())
		}
		if r := c.cli("sacct", "-X", "-n", "-P", "-j", fmt.Sprint(id), "--format=Partition"); strings.TrimSpace(r.out) != "gpu" {
			t.Errorf("sacct partition %q %s", r.out, r.err)
		}
		c.cli("scancel", fmt.Sprint(busy))
		c.waitTerminal(busy, 30*time.Second)
		if r := c.cli("sbatch", "-p", "short,nosuch", "--wrap", "true"); r.code == 0 || !strings.Contains(r.err, "invalid partition specified: nosuch") {
			t.Errorf("unknown partition in a list: exit %d, %s", r.code, r.err)
		}
	})

	t.Run("output patterns", func(t *testing.T) {
		dir := filepath.Join(wd, "pat")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		id := c.submit("#!/bin/sh\necho out\necho err >&2\n", "-J", "pj", "-t", "1:00",
			"-o", "pat/%J_%j_%6j_%x_%u_%N_%n_%t_%s_%A_%a_%%.out", "-e", "pat/%x-%J-%s.err")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("job %s: %s", j.State, j.ReasonDetail)
		}
		out := fmt.Sprintf("%d_%d_%06d_pj_%s_%s_0_0_batch_%d_4294967294_%%.out", id, id, id, j.User, j.BatchHost(), id)
		if got := readOut(t, filepath.Join(dir, out)); got != "out\n" {
			t.Errorf("%s: %q", out, got)
		}
		errName := fmt.Sprintf("pj-%d-batch.err", id)
		if got := readOut(t, filepath.Join(dir, errName)); got != "err\n" {
			t.Errorf("%s: %q", errName, got)
		}
		// Arrays: %A and %a are the array's id and the task.
		arr := c.submit("#!/bin/sh\necho $SLURM_ARRAY_TASK_ID\n", "--array=1-2", "-t", "1:00", "-o", "pat/arr-%A_%3a.out")
		for task := 1; task <= 2; task++ {
			name := filepath.Join(dir, fmt.Sprintf("arr-%d_%03d.out", arr, task))
			c.eventually(30*time.Second, name, func() bool { return readOutQuiet(name) == fmt.Sprintf("%d\n", task) })
		}
	})

	t.Run("output directory created after sbatch returns", func(t *testing.T) {
		later := filepath.Join(wd, "later", "logs")
		id := c.submit("#!/bin/sh\necho made it\n", "-o", "later/logs/out-%j.txt", "-t", "1:00")
		// A workflow engine creates the directory just after sbatch
		// returns: the launch waits for it (tided's output_grace).
		time.Sleep(300 * time.Millisecond)
		if err := os.MkdirAll(later, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(later), 0o777)
		os.Chmod(later, 0o777)
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("job %s (%s %s), want COMPLETED once its output directory appeared", j.State, j.Reason, j.ReasonDetail)
		}
		if got := readOut(t, filepath.Join(later, fmt.Sprintf("out-%d.txt", id))); got != "made it\n" {
			t.Errorf("output %q", got)
		}
		// A directory that never comes fails the job after the grace,
		// with the reason, and nothing creates it.
		id = c.submit("#!/bin/sh\necho no\n", "-o", "never/out-%j.txt", "-t", "1:00")
		j = c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || !strings.Contains(j.ReasonDetail+j.Placement+c.trailText(id), "could not open stdout file") {
			t.Errorf("job %s %s %q, want FAILED on its stdout file", j.State, j.Reason, j.ReasonDetail)
		}
		if _, err := os.Stat(filepath.Join(wd, "never")); err == nil {
			t.Error("the missing output directory was created")
		}
	})

	t.Run("squeue --start", func(t *testing.T) {
		var running []uint64
		for range 2 {
			running = append(running, c.submit("#!/bin/sh\nsleep 300\n", "--gpus=8", "-t", "5:00"))
		}
		for _, id := range running {
			c.waitState(id, api.StateRunning, 30*time.Second)
		}
		waiting := c.submit("#!/bin/sh\ntrue\n", "--gpus=8", "-t", "1:00")
		first := c.job(running[0])
		want := first.StartTime.Add(5 * time.Minute)
		for _, id := range running[1:] {
			if end := c.job(id).StartTime.Add(5 * time.Minute); end.Before(want) {
				want = end
			}
		}
		// The default policy (tide) plans on the backfill plan's grid:
		// running jobs' ends round up to backfill_resolution (1 min).
		if r := want.Truncate(time.Minute); !r.Equal(want) {
			want = r.Add(time.Minute)
		}
		var line string
		c.eventually(10*time.Second, "an expected start", func() bool {
			r := c.cli("squeue", "--start", "-h", "-j", fmt.Sprint(waiting), "-o", "%i %S")
			line = strings.TrimSpace(r.out)
			return line != "" && !strings.HasSuffix(line, "N/A")
		})
		if wantLine := fmt.Sprintf("%d %s", waiting, want.Local().Format("2006-01-02T15:04:05")); line != wantLine {
			t.Errorf("squeue --start: %q, want %q", line, wantLine)
		}
		for _, id := range append(running, waiting) {
			c.cli("scancel", fmt.Sprint(id))
		}
		for _, id := range append(running, waiting) {
			c.waitTerminal(id, 30*time.Second)
		}
	})
}

// readOut reads a job's output file, failing the test when it is
// missing.
func readOut(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		entries, _ := os.ReadDir(filepath.Dir(path))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("%v (the directory holds %q)", err, names)
	}
	return string(b)
}

func readOutQuiet(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// trailText is the job's events, one line each, for messages.
func (c *cluster) trailText(id uint64) string {
	ev, err := c.api.Events(context.Background(), id)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range ev {
		fmt.Fprintf(&b, "%s %s %s\n", e.Kind, e.Reason, e.Message)
	}
	return b.String()
}
