package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Issue 22, signals as Slurm delivers them: scancel --signal and
// --signal=SIG@TIME reach the job's steps, not the batch shell (-b: the
// shell alone, -f: the shell and its children, srun passing it on), and
// a job library's preemption path works: the step traps the signal,
// checkpoints, requeues its job with scontrol requeue, and the next run
// resumes from the checkpoint.

// libraryWorker is a step task as submitit runs one: rank 0 checkpoints
// on SIGUSR2 and requeues the job (scontrol requeue $SLURM_JOB_ID), the
// other ranks note the signal and go on (the requeue ends them); SIGTERM,
// which the requeue's kill brings, is bypassed. A run that finds the
// checkpoint resumes from it and finishes. What happens is noted in
// events.<job> (the first run's output may be cut short by the requeue).
const libraryWorker = `#!/bin/bash
ck=ckpt.$SLURM_JOB_ID
ev=events.$SLURM_JOB_ID
if [ -f "$ck" ]; then
  echo "rank $SLURM_PROCID resumed from $(cat "$ck") restart=$SLURM_RESTART_COUNT"
  exit 0
fi
trap 'echo "rank $SLURM_PROCID bypassed SIGTERM" >> $ev' TERM
if [ "$SLURM_PROCID" = 0 ]; then
  trap 'echo step42 > "$ck"; echo "rank 0 checkpointed" >> $ev; scontrol requeue "$SLURM_JOB_ID"; echo "requeue rc=$?" >> $ev; exit 0' USR2
else
  trap 'echo "rank $SLURM_PROCID got USR2" >> $ev' USR2
fi
touch "ready.$SLURM_JOB_ID.$SLURM_PROCID"
while :; do sleep 0.1; done
`

// libraryBatch is the batch script around it: it records a SIGUSR2 of
// its own (which Slurm does not send it) and runs the step on both
// nodes.
const libraryBatch = `#!/bin/bash
export PATH=%s:$PATH
trap 'echo batch-USR2 >> batch-signals.$SLURM_JOB_ID' USR2
echo "batch start restart=${SLURM_RESTART_COUNT:-0}"
srun -N2 -n2 bash %s
echo "batch end"
`

// as makes t the test c reports to, for one subtest, and returns what
// gives it back.
func (c *cluster) as(t *testing.T) func() {
	old := c.t
	c.t = t
	return func() { c.t = old }
}

// writeWork writes an executable file into the cluster's work dir.
func (c *cluster) writeWork(name, text string) string {
	c.t.Helper()
	p := filepath.Join(c.workDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// workFile reads a file of the work dir ("" when it does not exist).
func (c *cluster) workFile(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.workDir(), name))
	return string(b)
}

// waitWork waits until the work dir holds every file of names.
func (c *cluster) waitWork(d time.Duration, names ...string) {
	c.t.Helper()
	c.eventually(d, "files "+strings.Join(names, ", "), func() bool {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(c.workDir(), n)); err != nil {
				return false
			}
		}
		return true
	})
}

// checkResumed checks that job id, whose step requeued it from its
// checkpoint handler, ran twice and finished from the checkpoint.
func (c *cluster) checkResumed(id uint64) {
	c.t.Helper()
	j := c.waitTerminal(id, 2*time.Minute)
	out := c.workFile(fmt.Sprintf("lib-%d.out", id))
	if j.State != api.StateCompleted || j.Restarts != 1 {
		c.t.Fatalf("job %d: %s after %d restarts, want COMPLETED after 1; output:\n%s", id, j.State, j.Restarts, out)
	}
	for _, want := range []string{
		"batch start restart=0", "batch start restart=1", "rank 0 resumed from step42 restart=1",
		"rank 1 resumed from step42 restart=1", "batch end",
	} {
		if !strings.Contains(out, want) {
			c.t.Errorf("job %d's output lacks %q:\n%s", id, want, out)
		}
	}
	events := c.workFile(fmt.Sprintf("events.%d", id))
	// (The requeue's kill may end rank 0 before scontrol returns to it:
	// the requeue itself shows in the job's second run.)
	for _, want := range []string{"rank 0 checkpointed\n", "rank 1 got USR2\n"} {
		if strings.Count(events, want) != 1 {
			c.t.Errorf("job %d's events, want %q once:\n%s", id, want, events)
		}
	}
	if got := c.workFile(fmt.Sprintf("batch-signals.%d", id)); got != "" {
		c.t.Errorf("the batch shell of job %d got the steps' signal: %q", id, got)
	}
}

// TestSignalsReachSteps covers scancel's and sbatch's signal targets on
// a two-node cluster, and the preemption path of a job library.
func TestSignalsReachSteps(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 2})
	worker := c.writeWork("library-worker.sh", libraryWorker)
	batch := fmt.Sprintf(libraryBatch, binDir, worker)

	t.Run("scancel --signal=USR2 reaches the steps; the library checkpoints, requeues and resumes", func(t *testing.T) {
		defer c.as(t)()
		id := c.submit(batch, "-N2", "-o", "lib-%j.out", "--open-mode=append")
		c.waitWork(time.Minute, fmt.Sprintf("ready.%d.0", id), fmt.Sprintf("ready.%d.1", id))
		if r := c.cli("scancel", "--signal=USR2", fmt.Sprint(id)); r.code != 0 {
			t.Fatalf("scancel exit %d: %s%s", r.code, r.out, r.err)
		}
		c.checkResumed(id)
	})

	t.Run("sbatch --signal=USR2@T sends it to the steps before the time limit", func(t *testing.T) {
		defer c.as(t)()
		// One minute of limit, the warning 50 s before it: 10 s in.
		id := c.submit(batch, "-N2", "-t", "1", "--signal=USR2@50", "-o", "lib-%j.out", "--open-mode=append")
		c.waitWork(time.Minute, fmt.Sprintf("ready.%d.0", id), fmt.Sprintf("ready.%d.1", id))
		c.checkResumed(id)
		if sc := c.cli("scontrol", "show", "job", fmt.Sprint(id)); !strings.Contains(sc.out, "JobState=COMPLETED") {
			t.Errorf("scontrol show job %d:\n%s", id, sc.out)
		}
	})

	// A job whose shell and step both record SIGUSR1: the step's task
	// through srun, which passes on what reaches it.
	const recorder = `#!/bin/bash
export PATH=%s:$PATH
trap 'echo shell >> got.$SLURM_JOB_ID' USR1
srun -n1 bash -c 'trap "echo task >> got.$SLURM_JOB_ID" USR1; touch ready.$SLURM_JOB_ID; while [ ! -e release.$SLURM_JOB_ID ]; do sleep 0.1; done' &
while [ ! -e release.$SLURM_JOB_ID ]; do sleep 0.1; done
wait
`
	recorded := func(id uint64, who string) int { return strings.Count(c.workFile(fmt.Sprintf("got.%d", id)), who) }
	startRecorder := func(t *testing.T) uint64 {
		id := c.submit(fmt.Sprintf(recorder, binDir), "-o", "rec-%j.out")
		c.waitWork(time.Minute, fmt.Sprintf("ready.%d", id))
		return id
	}
	finish := func(id uint64) {
		c.writeWork(fmt.Sprintf("release.%d", id), "")
		if j := c.waitTerminal(id, time.Minute); j.State != api.StateCompleted {
			c.t.Errorf("job %d %s, output:\n%s", id, j.State, c.workFile(fmt.Sprintf("rec-%d.out", id)))
		}
	}
	scancel := func(args ...string) {
		c.t.Helper()
		if r := c.cli(append([]string{"scancel"}, args...)...); r.code != 0 {
			c.t.Fatalf("scancel %v: exit %d: %s%s", args, r.code, r.out, r.err)
		}
	}

	t.Run("-b signals the batch shell alone", func(t *testing.T) {
		defer c.as(t)()
		id := startRecorder(t)
		scancel("-b", "-s", "USR1", fmt.Sprint(id))
		c.eventually(30*time.Second, "the shell's trap", func() bool { return recorded(id, "shell") == 1 })
		// Then a signal to the steps: the task's line, the task's only.
		scancel("-s", "USR1", fmt.Sprint(id))
		c.eventually(30*time.Second, "the task's trap", func() bool { return recorded(id, "task") == 1 })
		finish(id)
		if s, k := recorded(id, "shell"), recorded(id, "task"); s != 1 || k != 1 {
			t.Errorf("shell got %d, task %d signals; want 1 each (-b: the shell, no -b: the step)", s, k)
		}
	})

	t.Run("-f signals the batch shell and, through srun, the step once", func(t *testing.T) {
		defer c.as(t)()
		id := startRecorder(t)
		scancel("-f", "-s", "USR1", fmt.Sprint(id))
		c.eventually(30*time.Second, "both traps", func() bool { return recorded(id, "shell") == 1 && recorded(id, "task") == 1 })
		finish(id)
		if s, k := recorded(id, "shell"), recorded(id, "task"); s != 1 || k != 1 {
			t.Errorf("shell got %d, task %d signals; want 1 each", s, k)
		}
	})

	t.Run("a signal to a job without steps reaches nothing and is no error", func(t *testing.T) {
		defer c.as(t)()
		id := c.submit("#!/bin/bash\ntrap 'echo shell >> got.$SLURM_JOB_ID' USR1\ntouch ready.$SLURM_JOB_ID\n"+
			"while [ ! -e release.$SLURM_JOB_ID ]; do sleep 0.1; done\n", "-o", "rec-%j.out")
		c.waitWork(time.Minute, fmt.Sprintf("ready.%d", id))
		scancel("-s", "USR1", fmt.Sprint(id))
		// -b then shows that the shell was listening all along.
		scancel("-b", "-s", "USR1", fmt.Sprint(id))
		c.eventually(30*time.Second, "the shell's trap", func() bool { return recorded(id, "shell") >= 1 })
		finish(id)
		if s := recorded(id, "shell"); s != 1 {
			t.Errorf("the shell got %d signals, want 1 (the -b one)", s)
		}
	})

	t.Run("--signal=KILL cancels the job", func(t *testing.T) {
		defer c.as(t)()
		id := startRecorder(t)
		scancel("--signal=KILL", fmt.Sprint(id))
		if j := c.waitTerminal(id, time.Minute); j.State != api.StateCancelled {
			t.Errorf("job %d %s after scancel --signal=KILL, want CANCELLED", id, j.State)
		}
	})
}
