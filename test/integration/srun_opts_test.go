package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestSrunOptions covers srun's options that change what a step does
// (issue 22): steps with their own resources inside an allocation
// (--exact side by side, waiting for busy resources, --overlap,
// --immediate), per-task GPUs, --multi-prog, task prologs and epilogs,
// -W, -v's lines, CPU binding, --mpi=pmi2, -E, per-task output files,
// salloc --no-shell and scancel J.S.
func TestSrunOptions(t *testing.T) {
	c := stepCluster(t)

	t.Run("--exact steps run side by side in a two-node allocation", func(t *testing.T) {
		// Four one-task steps in a job of two CPUs on each of two
		// nodes: each waits until all four run, which only --exact
		// allows (each holds one CPU).
		script := `#!/bin/sh
for i in 1 2 3 4; do
  srun --exact -n1 sh -c 'touch bar.$SLURM_JOB_ID.$SLURM_STEP_ID; n=0
    while [ $(ls bar.$SLURM_JOB_ID.* | wc -l) -lt 4 ]; do n=$((n+1)); [ $n -gt 600 ] && { echo TIMEOUT; exit 1; }; sleep 0.05; done
    echo step $SLURM_STEP_ID on $SLURMD_NODENAME' &
done
wait
`
		j, out := c.batchOutput(script, "-N2", "--ntasks-per-node=2")
		if j.State != api.StateCompleted || strings.Contains(out, "TIMEOUT") || strings.Contains(out, "temporarily disabled") {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		perNode := map[string]int{}
		for _, m := range regexp.MustCompile(`step \d+ on (gpu\d+)`).FindAllStringSubmatch(out, -1) {
			perNode[m[1]]++
		}
		if perNode["gpu01"] != 2 || perNode["gpu02"] != 2 {
			t.Fatalf("steps per node %v, want two on each; output:\n%s", perNode, out)
		}
		steps, err := c.api.Steps(context.Background(), []uint64{j.ID})
		if err != nil || len(steps) != 4 {
			t.Fatalf("steps %+v, %v", steps, err)
		}
		for _, s := range steps {
			if s.CPUs != 1 || !s.Exact || len(s.Layout) != 1 || s.Layout[0].CPUs != 1 || s.State != api.StateCompleted {
				t.Errorf("step %d: %+v", s.StepID, s)
			}
		}
	})

	t.Run("a step without --exact holds every CPU: the next one waits for it", func(t *testing.T) {
		script := `#!/bin/sh
srun -n1 sh -c 'sleep 1; echo first' &
sleep 0.3
srun -n1 echo second
wait
`
		j, out := c.batchOutput(script, "-N1", "-n2")
		if j.State != api.StateCompleted {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		want := fmt.Sprintf("srun: Job %d step creation temporarily disabled, retrying (Requested nodes are busy)", j.ID)
		first, second := strings.Index(out, "first"), strings.Index(out, "second")
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("srun: Step created for job %d", j.ID)) || first < 0 || second < first {
			t.Fatalf("output:\n%s\nwant %q, then first before second", out, want)
		}
	})

	t.Run("--immediate gives a busy step up", func(t *testing.T) {
		script := `#!/bin/sh
srun -n1 sh -c 'touch held.$SLURM_JOB_ID; sleep 2' &
while [ ! -e held.$SLURM_JOB_ID ]; do sleep 0.05; done
srun -I -n1 echo never
echo rc=$?
wait
`
		j, out := c.batchOutput(script, "-N1", "-n2")
		want := fmt.Sprintf("srun: error: Unable to create step for job %d: Requested nodes are busy", j.ID)
		if j.State != api.StateCompleted || !strings.Contains(out, want) || !strings.Contains(out, "rc=1") || strings.Contains(out, "never") {
			t.Fatalf("job %s, output:\n%s\nwant %q and rc=1", j.State, out, want)
		}
	})

	t.Run("--overlap shares a step's resources with a running step", func(t *testing.T) {
		script := `#!/bin/sh
srun -N2 sh -c 'touch a.$SLURM_JOB_ID.$SLURM_PROCID; n=0; while [ ! -e b.$SLURM_JOB_ID ]; do n=$((n+1)); [ $n -gt 600 ] && { echo TIMEOUT; exit 1; }; sleep 0.05; done; echo held done' &
while [ $(ls a.$SLURM_JOB_ID.* 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.05; done
srun --overlap -N2 -l sh -c 'echo overlap on $SLURMD_NODENAME'
touch b.$SLURM_JOB_ID
wait
`
		j, out := c.batchOutput(script, "-N2", "--ntasks-per-node=1")
		if j.State != api.StateCompleted || strings.Contains(out, "TIMEOUT") || strings.Contains(out, "temporarily disabled") ||
			!strings.Contains(out, "0: overlap on gpu01") || !strings.Contains(out, "1: overlap on gpu02") || strings.Count(out, "held done") != 2 {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
	})

	t.Run("-n4 --gpus-per-task=1: each task its own GPU", func(t *testing.T) {
		r := c.cli("srun", "-n4", "--gpus-per-task=1", "-l", "printenv", "CUDA_VISIBLE_DEVICES")
		if r.code != 0 {
			t.Fatalf("srun exit %d: %s%s", r.code, r.out, r.err)
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			_, g, _ := strings.Cut(l, ": ")
			if strings.Contains(g, ",") || g == "" || seen[g] {
				t.Fatalf("a task sees %q; output:\n%s", g, r.out)
			}
			seen[g] = true
		}
		if len(seen) != 4 {
			t.Fatalf("%d tasks, want 4:\n%s", len(seen), r.out)
		}
		// Inside a two-node allocation: two tasks a node, each its own.
		j, out := c.batchOutput("#!/bin/sh\nsrun -N2 -n4 --gpus-per-task=1 -l sh -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES' | sort\n",
			"-N2", "--ntasks-per-node=2", "--gpus-per-node=4")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		perNode := map[string]map[string]bool{}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 || strings.Contains(f[2], ",") {
				t.Fatalf("bad line %q in:\n%s", l, out)
			}
			if perNode[f[1]] == nil {
				perNode[f[1]] = map[string]bool{}
			}
			perNode[f[1]][f[2]] = true
		}
		if j.State != api.StateCompleted || len(lines) != 4 || len(perNode["gpu01"]) != 2 || len(perNode["gpu02"]) != 2 {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
	})

	t.Run("--gpu-bind=single:2 shares each GPU between two tasks", func(t *testing.T) {
		r := c.cli("srun", "-n4", "--gpus=2", "--gpu-bind=single:2", "-l", "printenv", "CUDA_VISIBLE_DEVICES")
		if r.code != 0 {
			t.Fatalf("srun exit %d: %s%s", r.code, r.out, r.err)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			k, v, _ := strings.Cut(l, ": ")
			got[k] = v
		}
		if got["0"] != got["1"] || got["2"] != got["3"] || got["0"] == got["2"] || strings.Contains(got["0"]+got["2"], ",") {
			t.Fatalf("tasks' GPUs %v, want two per GPU:\n%s", got, r.out)
		}
	})

	t.Run("--multi-prog runs each task's line with %t and %o", func(t *testing.T) {
		conf := filepath.Join(c.workDir(), "multi.conf")
		os.WriteFile(conf, []byte("# ranks program args\n0 echo zero %t\n1-2 echo 'mid dle' %t:%o\n* echo rest \\\n  %t\n"), 0o644)
		r := c.cli("srun", "-n4", "-l", "--multi-prog", conf)
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sort.Strings(lines)
		want := "0: zero 0|1: mid dle 1:0|2: mid dle 2:1|3: rest 3"
		if r.code != 0 || strings.Join(lines, "|") != want {
			t.Fatalf("srun exit %d, output %q (stderr %q), want %q", r.code, strings.Join(lines, "|"), r.err, want)
		}
		os.WriteFile(conf, []byte("0 echo a\n2 echo c\n"), 0o644)
		r = c.cli("srun", "-n3", "--multi-prog", conf)
		if r.code != 1 || !strings.Contains(r.err, "no record for task id 1") {
			t.Fatalf("a task without a line: exit %d, stderr %q", r.code, r.err)
		}
	})

	t.Run("--task-prolog sets the task's environment, --task-epilog runs after it", func(t *testing.T) {
		dir := c.workDir()
		prolog := filepath.Join(dir, "tprolog.sh")
		epilog := filepath.Join(dir, "tepilog.sh")
		os.WriteFile(prolog, []byte("#!/bin/sh\necho 'export GREETING=hello world'\necho 'print from-prolog'\necho 'unset DROPME'\n"), 0o755)
		os.WriteFile(epilog, []byte("#!/bin/sh\necho epilog-of-$SLURM_PROCID\ntouch "+dir+"/epi.$SLURM_JOB_ID.$SLURM_PROCID\n"), 0o755)
		cmd := c.command(nil, "srun", "-n2", "-l", "--task-prolog="+prolog, "--task-epilog="+epilog, "sh", "-c", `echo "G=$GREETING D=${DROPME-unset}"`)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "DROPME=x")
		outb, err := cmd.CombinedOutput()
		out := string(outb)
		if err != nil {
			t.Fatalf("srun: %v\n%s", err, out)
		}
		for _, want := range []string{"0: from-prolog", "1: from-prolog", "0: G=hello world D=unset", "1: G=hello world D=unset", "0: epilog-of-0", "1: epilog-of-1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		id := lastJob(t, c)
		for _, r := range []string{"0", "1"} {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("epi.%d.%s", id, r))); err != nil {
				t.Errorf("epilog of task %s: %v", r, err)
			}
		}
	})

	t.Run("-W kills the other tasks that long after the first ends", func(t *testing.T) {
		r := c.cli("srun", "-n3", "-W", "1", "sh", "-c", "[ $SLURM_PROCID = 0 ] && exit 0; sleep 120")
		if !strings.Contains(r.err, "srun: First task exited 1s ago") || !regexp.MustCompile(`StepId=\d+\.0 tasks 1-2: running`).MatchString(r.err) ||
			!regexp.MustCompile(`task 0: exited`).MatchString(r.err) || strings.Count(r.err, ": Killed") != 2 || r.code == 0 {
			t.Fatalf("srun -W1 exit %d, stderr:\n%s", r.code, r.err)
		}
		// -W0 is no limit: the tasks end as they will.
		if r := c.cli("srun", "-n2", "-W0", "sh", "-c", "[ $SLURM_PROCID = 1 ] && sleep 1; echo done $SLURM_PROCID"); r.code != 0 || strings.Count(r.out, "done") != 2 {
			t.Fatalf("srun -W0 exit %d: %s%s", r.code, r.out, r.err)
		}
	})

	t.Run("-v prints the lines tools read the job and step from", func(t *testing.T) {
		r := c.cli("srun", "-v", "-N2", "-l", "hostname")
		m := regexp.MustCompile("srun: jobid (\\d+): nodes\\(2\\):`gpu\\[01-02\\]', cpu counts: \\d+\\(x2\\)").FindStringSubmatch(r.err)
		if r.code != 0 || m == nil {
			t.Fatalf("srun -v exit %d, stderr:\n%s", r.code, r.err)
		}
		for _, want := range []string{"srun: defined options", "srun: verbose             : 1", "srun: nodes               : 2",
			"srun: launching StepId=" + m[1] + ".0 on host gpu01, 1 tasks: 0", "srun: launching StepId=" + m[1] + ".0 on host gpu02, 1 tasks: 1"} {
			if !strings.Contains(r.err, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.err)
			}
		}
		if first := regexp.MustCompile(`(?i)job(id)?[ =](\d+)`).FindStringSubmatch(r.err); first == nil || first[2] != m[1] {
			t.Errorf("the first job id on stderr is %v, want %s", first, m[1])
		}
	})

	t.Run("-v inside an allocation and --test-only", func(t *testing.T) {
		j, out := c.batchOutput("#!/bin/sh\nsrun -v -n1 true\n", "-N2")
		want := fmt.Sprintf("srun: jobid %d: nodes(2):`gpu[01-02]', cpu counts: 1(x2)", j.ID)
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("srun: launching StepId=%d.0 on host gpu01, 1 tasks: 0", j.ID)) {
			t.Fatalf("job %s, output:\n%s\nwant %q", j.State, out, want)
		}
		r := c.cli("srun", "--test-only", "-N1", "hostname")
		if r.code != 0 || !regexp.MustCompile(`srun: Job \d+ to start at \d+`).MatchString(r.err) || r.out != "" {
			t.Fatalf("srun --test-only exit %d: %q %q", r.code, r.out, r.err)
		}
	})

	t.Run("--cpu-bind=verbose,map_cpu binds each task", func(t *testing.T) {
		if n := len(availableCPUs(t)); n < 2 {
			t.Skipf("this host lets tided use %d CPUs; the test binds tasks to CPUs 0 and 1", n)
		}
		r := c.cli("srun", "-N1", "-n2", "-l", "--cpu-bind=verbose,map_cpu:1,0", "grep", "Cpus_allowed_list", "/proc/self/status")
		if r.code != 0 {
			t.Fatalf("srun exit %d: %s%s", r.code, r.out, r.err)
		}
		for _, want := range []string{"0: Cpus_allowed_list:\t1", "1: Cpus_allowed_list:\t0"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
		if !regexp.MustCompile(`cpu-bind=MAP  - gpu01, task  0  0 \[\d+\]: mask 0x2 set`).MatchString(r.err) {
			t.Errorf("no verbose binding line for task 0:\n%s", r.err)
		}
	})

	t.Run("--mpi=pmi2 and -E set the tasks' environment", func(t *testing.T) {
		r := c.cli("srun", "-n2", "-l", "--mpi=pmi2", "sh", "-c", "echo $PMI_RANK/$PMI_SIZE $SLURM_MPI_TYPE ${PMI_FD-nofd}")
		if r.code != 0 || !strings.Contains(r.out, "0: 0/2 pmi2 nofd") || !strings.Contains(r.out, "1: 1/2 pmi2 nofd") {
			t.Fatalf("srun --mpi=pmi2 exit %d: %s%s", r.code, r.out, r.err)
		}
		j, out := c.batchOutput("#!/bin/sh\nsrun -E -n1 -N1 printenv SLURM_NNODES\nsrun -n1 -N1 printenv SLURM_NNODES\n", "-N2")
		if j.State != api.StateCompleted || strings.TrimSpace(out) != "2\n1" {
			t.Fatalf("job %s, -E then without: %q", j.State, out)
		}
	})

	t.Run("per-task output files, --open-mode=append and %J", func(t *testing.T) {
		dir := c.workDir()
		os.WriteFile(filepath.Join(dir, "app-1.txt"), []byte("old\n"), 0o644)
		r := c.cli("srun", "-n2", "--open-mode=append", "-o", "app-%t.txt", "sh", "-c", "echo new $SLURM_PROCID")
		b0, _ := os.ReadFile(filepath.Join(dir, "app-0.txt"))
		b1, _ := os.ReadFile(filepath.Join(dir, "app-1.txt"))
		if r.code != 0 || string(b0) != "new 0\n" || string(b1) != "old\nnew 1\n" {
			t.Fatalf("srun exit %d (%s); app-0 %q app-1 %q", r.code, r.err, b0, b1)
		}
		os.WriteFile(filepath.Join(dir, "in-0.txt"), []byte("zero\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "in-1.txt"), []byte("one\n"), 0o644)
		r = c.cli("srun", "-n2", "-l", "-i", "in-%t.txt", "cat")
		if lines := strings.Split(strings.TrimSpace(r.out), "\n"); r.code != 0 || len(lines) != 2 || !strings.Contains(r.out, "0: zero") || !strings.Contains(r.out, "1: one") {
			t.Fatalf("srun -i in-%%t.txt exit %d: %q %q", r.code, r.out, r.err)
		}
		r = c.cli("srun", "-o", "jstep-%J.txt", "true")
		id := lastJob(t, c)
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("jstep-%d.0.txt", id))); r.code != 0 || err != nil {
			t.Fatalf("srun exit %d; jstep-%d.0.txt: %v", r.code, id, err)
		}
	})

	t.Run("salloc --no-shell keeps the allocation until scancel", func(t *testing.T) {
		r := c.cli("salloc", "--no-shell", "-N1", "-t", "5")
		m := regexp.MustCompile(`salloc: Granted job allocation (\d+)`).FindStringSubmatch(r.err)
		if r.code != 0 || m == nil {
			t.Fatalf("salloc --no-shell exit %d, stderr %q", r.code, r.err)
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if j := c.job(id); j.State != api.StateRunning || !j.Allocation {
			t.Fatalf("job %d after salloc exited: %s allocation=%v", id, j.State, j.Allocation)
		}
		if r := c.cli("srun", "--jobid="+m[1], "printenv", "SLURM_JOB_ID"); r.code != 0 || strings.TrimSpace(r.out) != m[1] {
			t.Fatalf("srun --jobid=%s: exit %d, %s%s", m[1], r.code, r.out, r.err)
		}
		if r := c.cli("scancel", m[1]); r.code != 0 {
			t.Fatalf("scancel: %d %s", r.code, r.err)
		}
		if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateCancelled {
			t.Fatalf("job %d: %s", id, j.State)
		}
	})

	t.Run("scancel J.S cancels one step; the job goes on", func(t *testing.T) {
		script := `#!/bin/sh
srun sh -c 'echo step0 up; exec sleep 300' 2> s0.err.$SLURM_JOB_ID &
wait
echo step0 rc=$?
srun echo next step
`
		id := c.submit(strings.Replace(script, "\n", fmt.Sprintf("\nexport PATH=%s:$PATH\n", binDir), 1), "-o", "scancel-%j.out", "-N1")
		outFile := filepath.Join(c.workDir(), fmt.Sprintf("scancel-%d.out", id))
		c.eventually(30*time.Second, "step 0 runs", func() bool {
			b, _ := os.ReadFile(outFile)
			return strings.Contains(string(b), "step0 up")
		})
		if r := c.cli("scancel", fmt.Sprintf("%d.7", id)); r.code != 1 || !strings.Contains(r.err, fmt.Sprintf("Kill job error on job step id %d.7: Invalid job step id specified", id)) {
			t.Fatalf("scancel of an unknown step: exit %d, stderr %q", r.code, r.err)
		}
		if r := c.cli("scancel", "-v", fmt.Sprintf("%d.0", id)); r.code != 0 || !strings.Contains(r.err, fmt.Sprintf("scancel: Terminating step %d.0", id)) {
			t.Fatalf("scancel %d.0: exit %d, stderr %q", id, r.code, r.err)
		}
		j := c.waitTerminal(id, 60*time.Second)
		out, _ := os.ReadFile(outFile)
		errs, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("s0.err.%d", id)))
		if j.State != api.StateCompleted || !strings.Contains(string(out), "next step") || !strings.Contains(string(out), "step0 up") {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		if !regexp.MustCompile(fmt.Sprintf(`slurmstepd: error: \*\*\* STEP %d\.0 ON gpu01 CANCELLED AT \S+ \*\*\*`, id)).Match(errs) ||
			!strings.Contains(string(errs), "srun: Job step aborted") {
			t.Fatalf("srun's stderr:\n%s", errs)
		}
		got := strings.TrimSpace(c.cli("sacct", "-j", fmt.Sprint(id), "-P", "-n", "--format=JobID,State").out)
		if !strings.Contains(got, fmt.Sprintf("%d.0|CANCELLED", id)) || !strings.Contains(got, fmt.Sprintf("%d.1|COMPLETED", id)) {
			t.Fatalf("sacct:\n%s", got)
		}
	})
}

// TestBatchHostStepKillWait: a cancelled batch job's step tasks on the
// batch host get SIGTERM and the kill wait before SIGKILL, as the tasks
// on the job's other nodes do, rather than dying with the batch
// script's cgroup at once.
func TestBatchHostStepKillWait(t *testing.T) {
	c := stepCluster(t)
	dir := c.workDir()
	script := fmt.Sprintf(`#!/bin/sh
export PATH=%s:$PATH
srun -N2 sh -c 'trap "echo term > term.$SLURM_JOB_ID.$SLURMD_NODENAME; sleep 1; echo after > after.$SLURM_JOB_ID.$SLURMD_NODENAME; exit 0" TERM
touch ready.$SLURM_JOB_ID.$SLURMD_NODENAME; while :; do sleep 0.1; done'
`, binDir)
	id := c.submit(script, "-N2", "-o", "/dev/null")
	c.eventually(30*time.Second, "both tasks are ready", func() bool {
		for _, n := range []string{"gpu01", "gpu02"} {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready.%d.%s", id, n))); err != nil {
				return false
			}
		}
		return true
	})
	if r := c.cli("scancel", fmt.Sprint(id)); r.code != 0 {
		t.Fatalf("scancel: %d %s", r.code, r.err)
	}
	if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCancelled {
		t.Fatalf("job %s", j.State)
	}
	jj := c.job(id)
	batchHost := jj.BatchHost()
	for _, n := range []string{"gpu01", "gpu02"} {
		for _, f := range []string{"term", "after"} {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s.%d.%s", f, id, n))); err != nil {
				t.Errorf("task on %s (batch host %s) left no %s file: it did not get SIGTERM and the kill wait: %v", n, batchHost, f, err)
			}
		}
	}
}

// availableCPUs are the CPUs this process may run on (tided's, which
// runs alike).
func availableCPUs(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	m := regexp.MustCompile(`Cpus_allowed_list:\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Skip("no Cpus_allowed_list")
	}
	var out []int
	for _, part := range strings.Split(string(m[1]), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		z := a
		if isRange {
			z, _ = strconv.Atoi(hi)
		}
		for i := a; i <= z; i++ {
			out = append(out, i)
		}
	}
	return out
}
