package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// arrayScript logs when each task starts and ends (appends of one short
// line are atomic), so the overlap can be checked from the tasks' side
// too, not only by sampling squeue.
const arrayScript = `#!/bin/sh
echo "start $(date +%s%N) $SLURM_JOB_ID" >> tasks.log
sleep 1
echo "end $(date +%s%N) $SLURM_JOB_ID" >> tasks.log
`

func TestArrayThrottleOnLocalCluster(t *testing.T) {
	c := newCluster(t, 2)
	id := c.submit(arrayScript, "--array=0-19%4", "-o", "arr-%j.out")

	maxRunning, polls := 0, 0
	c.eventually(120*time.Second, "all 20 tasks end", func() bool {
		l, err := c.api.Jobs(context.Background(), api.JobFilter{IDs: []uint64{id}, All: true})
		if err != nil {
			return false
		}
		polls++
		running, ended, tasks := 0, 0, 0
		for _, j := range l.Jobs {
			switch {
			case j.IsArrayMeta():
				tasks += j.ArrayPending.Len()
			case j.State.Active():
				running++
				tasks++
			case j.State.Terminal():
				ended++
				tasks++
			default:
				tasks++
			}
		}
		if tasks != 20 {
			t.Errorf("array holds %d tasks, want 20", tasks)
		}
		maxRunning = max(maxRunning, running)
		return ended == 20
	})
	if maxRunning > 4 {
		t.Fatalf("squeue saw %d tasks running at once, throttle is 4", maxRunning)
	}
	if maxRunning == 0 {
		t.Fatalf("never saw a task running in %d polls", polls)
	}

	b, err := os.ReadFile(filepath.Join(c.workDir(), "tasks.log"))
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	jobs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("log line %q", line)
		}
		at, _ := strconv.ParseInt(f[1], 10, 64)
		d := 1
		if f[0] == "end" {
			d = -1
		}
		evs = append(evs, ev{at, d})
		jobs[f[2]] = true
	}
	if len(evs) != 40 || len(jobs) != 20 {
		t.Fatalf("%d log lines from %d jobs, want 40 from 20", len(evs), len(jobs))
	}
	sort.Slice(evs, func(a, b int) bool {
		return evs[a].at < evs[b].at || evs[a].at == evs[b].at && evs[a].delta < evs[b].delta
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	if peak > 4 {
		t.Fatalf("%d tasks ran at once by their own clocks, throttle is 4", peak)
	}

	// Every task is accounted as N_I.
	r := c.cli("sacct", "-X", "-j", fmt.Sprint(id), "-P", "-n", "--format=JobID,State")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 20 {
		t.Fatalf("sacct -j %d: %d lines (%s%s)", id, len(lines), r.out, r.err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("%d_", id)) || !strings.HasSuffix(l, "|COMPLETED") {
			t.Fatalf("sacct line %q", l)
		}
	}
}

func TestAfterOKOnFailedJobOnLocalCluster(t *testing.T) {
	c := newCluster(t, 1)
	first := c.submit("#!/bin/sh\nexit 1\n")
	dep := c.submit("#!/bin/sh\ntrue\n", "-d", fmt.Sprintf("afterok:%d", first))
	if j := c.waitTerminal(first, 30*time.Second); j.State != api.StateFailed {
		t.Fatalf("first job %s", j.State)
	}
	c.eventually(20*time.Second, "dependent never satisfied", func() bool {
		return c.job(dep).Reason == api.ReasonDependencyNeverSatisfied
	})
	// It stays pending, and says why in Slurm's words.
	time.Sleep(time.Second)
	if j := c.job(dep); j.State != api.StatePending {
		t.Fatalf("dependent %s", j.State)
	}
	r := c.cli("squeue", "-h", "-j", fmt.Sprint(dep), "-o", "%i %t %r")
	if got, want := strings.TrimSpace(r.out), fmt.Sprintf("%d PD DependencyNeverSatisfied", dep); got != want {
		t.Fatalf("squeue = %q, want %q", got, want)
	}
	r = c.cli("scontrol", "show", "job", fmt.Sprint(dep))
	if want := fmt.Sprintf("Dependency=afterok:%d(failed)", first); !strings.Contains(r.out, want) {
		t.Fatalf("scontrol show job lacks %s:\n%s", want, r.out)
	}
	// An unknown job is refused at submit, as Slurm does.
	r = c.cli("sbatch", "-d", "afterok:999999", "--wrap", "true")
	if r.code == 0 || !strings.Contains(r.err, "Job dependency problem") {
		t.Fatalf("sbatch with an unknown dependency: %d %q", r.code, r.err)
	}
}
