package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// envCluster is a two-node cluster under a two-level switch tree: s1
// over gpu01, s2 over gpu02, spine over both.
func envCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOpts(t, clusterOpts{nodes: 2, switches: []string{
		`{name: s1, nodes: "gpu01"}`, `{name: s2, nodes: "gpu02"}`, `{name: spine, switches: "s[1-2]"}`}})
}

// readEnvFile reads a file of "K=V" lines into a map.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// checkEnv compares want with got: a value "+" wants a positive integer,
// "int" an integer, "octal" a umask ("0022"), "" the variable absent.
func checkEnv(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		switch {
		case v == "" && ok:
			t.Errorf("%s: %s=%s set, want it absent", what, k, g)
		case v == "":
		case v == "+":
			if n, err := strconv.Atoi(g); err != nil || n <= 0 {
				t.Errorf("%s: %s=%q, want a positive number", what, k, g)
			}
		case v == "int":
			if _, err := strconv.Atoi(g); err != nil {
				t.Errorf("%s: %s=%q, want a number", what, k, g)
			}
		case v == "octal":
			if _, err := strconv.ParseUint(g, 8, 32); err != nil || len(g) != 4 {
				t.Errorf("%s: %s=%q, want a umask", what, k, g)
			}
		case g != v:
			t.Errorf("%s: %s=%q, want %q", what, k, g, v)
		}
	}
}

// TestJobAndStepEnvironment checks the environment of a two-node GPU
// batch job and of the tasks of its srun step against Slurm's names and
// values (man sbatch and man srun, OUTPUT ENVIRONMENT VARIABLES), and
// the input variables srun inherits from the job.
func TestJobAndStepEnvironment(t *testing.T) {
	c := envCluster(t)
	launchHost := "127.0.0.1"
	if c.hosts != nil {
		launchHost = c.hosts.addr("gpu01") // srun runs on the batch host
	}

	t.Run("batch job and step of -N2 --gpus-per-node=2 --ntasks-per-node=2 --mem=4G", func(t *testing.T) {
		script := fmt.Sprintf(`#!/bin/sh
export PATH=%s:$PATH
env | grep -E '^SLURMD?_' > batch-$SLURM_JOB_ID.env
srun sh -c 'env | grep -E "^SLURMD?_" > step-$SLURM_JOB_ID.$SLURM_PROCID.env; echo "pid $$ $SLURM_TASK_PID" >> step-$SLURM_JOB_ID.$SLURM_PROCID.env'
`, binDir)
		id := c.submit(script, "-N2", "--gpus-per-node=2", "--ntasks-per-node=2", "--mem=4G", "-J", "envjob",
			"-o", "env-%j.out", "-d", "singleton")
		j := c.waitTerminal(id, 90*time.Second)
		out, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("env-%d.out", id)))
		if j.State != api.StateCompleted {
			t.Fatalf("job %s %s, output:\n%s", j.State, j.Exit, out)
		}
		jid := strconv.FormatUint(id, 10)
		host, _ := os.Hostname()
		batch := readEnvFile(t, filepath.Join(c.workDir(), "batch-"+jid+".env"))
		checkEnv(t, "batch", batch, map[string]string{
			"SLURM_JOB_ID": jid, "SLURM_JOBID": jid, "SLURM_JOB_NAME": "envjob", "SLURM_CLUSTER_NAME": "it",
			"SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NODELIST": "gpu[01-02]",
			"SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
			"SLURM_NTASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_GPUS_PER_NODE": "2",
			"SLURM_GPUS_ON_NODE": "2", "SLURM_MEM_PER_NODE": "4096", "SLURM_JOB_CPUS_PER_NODE": "2(x2)",
			"SLURM_CPUS_ON_NODE": "2", "SLURMD_NODENAME": "gpu01", "SLURM_NODEID": "0", "SLURM_PROCID": "0",
			"SLURM_LOCALID": "0", "SLURM_GTIDS": "0", "SLURM_SUBMIT_DIR": c.workDir(), "SLURM_SUBMIT_HOST": host,
			"SLURM_TOPOLOGY_ADDR": "spine.s1.gpu01", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node",
			"SLURM_JOB_DEPENDENCY": "singleton", "SLURM_TASK_PID": "+", "SLURM_PRIO_PROCESS": "int",
			"SLURM_JOB_UID": strconv.Itoa(os.Getuid()),
			// Not for this job: applied and removed, or options not given.
			"SLURM_UMASK": "", "SLURM_GPUS": "", "SLURM_GPUS_PER_TASK": "", "SLURM_MEM_PER_CPU": "",
			"SLURM_STEP_ID": "", "SLURM_LAUNCH_NODE_IPADDR": "", "SLURM_JOB_QOS": "", "SLURM_JOB_RESERVATION": "",
		})
		if g := batch["SLURM_JOB_GPUS"]; g != gpuList(j.Alloc[0].GPUs) {
			t.Errorf("batch: SLURM_JOB_GPUS=%q, want the batch host's %v", g, j.Alloc[0].GPUs)
		}
		for rank := range 4 {
			step := readEnvFile(t, filepath.Join(c.workDir(), fmt.Sprintf("step-%s.%d.env", jid, rank)))
			node := j.Alloc[rank/2]
			leaf := map[string]string{"gpu01": "s1", "gpu02": "s2"}[node.Node]
			what := fmt.Sprintf("task %d", rank)
			checkEnv(t, what, step, map[string]string{
				"SLURM_JOB_ID": jid, "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": strconv.Itoa(rank),
				"SLURM_LOCALID": strconv.Itoa(rank % 2), "SLURM_NODEID": strconv.Itoa(rank / 2),
				"SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "2", "SLURM_NNODES": "2",
				"SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_TASKS_PER_NODE": "2(x2)",
				"SLURMD_NODENAME": node.Node, "SLURM_TOPOLOGY_ADDR": "spine." + leaf + "." + node.Node,
				"SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node", "SLURM_LAUNCH_NODE_IPADDR": launchHost,
				"SLURM_SRUN_COMM_HOST": launchHost, "SLURM_SRUN_COMM_PORT": "+", "SLURM_TASK_PID": "+",
				"SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": gpuList(node.GPUs), "SLURM_JOB_GPUS": gpuList(node.GPUs),
				"SLURM_GPUS_PER_NODE": "2", "SLURM_MEM_PER_NODE": "4096", "SLURM_CLUSTER_NAME": "it",
				"SLURM_UMASK": "octal", "SLURM_JOB_NUM_NODES": "2",
			})
			// The "pid" line: the task's own pid is SLURM_TASK_PID.
			b, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("step-%s.%d.env", jid, rank)))
			if f := strings.Fields(lastLine(string(b))); len(f) != 3 || f[0] != "pid" || f[1] != f[2] {
				t.Errorf("%s: the task's pid and SLURM_TASK_PID: %q", what, lastLine(string(b)))
			}
		}
	})

	t.Run("srun inherits SLURM_GPUS_PER_TASK: one GPU per rank", func(t *testing.T) {
		script := fmt.Sprintf("#!/bin/sh\nexport PATH=%s:$PATH\nsrun sh -c 'echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES'\n", binDir)
		id := c.submit(script, "-N2", "-n4", "--gpus-per-task=1", "-o", "gpt-%j.out")
		j := c.waitTerminal(id, 90*time.Second)
		out, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("gpt-%d.out", id)))
		if j.State != api.StateCompleted {
			t.Fatalf("job %s %s, output:\n%s", j.State, j.Exit, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 4 {
			t.Fatalf("%d tasks, want 4:\n%s", len(lines), out)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) != 2 || strings.Contains(f[1], ",") {
				t.Errorf("task line %q: want one GPU per task", l)
			}
		}
	})

	t.Run("SBATCH_* variables set options, the command line wins", func(t *testing.T) {
		// Partition short takes at most 30 seconds.
		cmd := c.command(nil, "sbatch", "--parsable", "-t", "0:20", "--wrap", "true")
		cmd.Dir = c.workDir()
		cmd.Env = append(cmd.Env, "SBATCH_PARTITION=short", "SBATCH_TIMELIMIT=0:25", "SBATCH_JOB_NAME=fromenv", "SBATCH_REQUEUE=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		j := c.job(id)
		if j.Partition != "short" || j.Name != "fromenv" || j.TimeLimit != 20 {
			t.Errorf("partition %q name %q time limit %ds, want short, fromenv and the command line's 20s", j.Partition, j.Name, j.TimeLimit)
		}
		c.waitTerminal(id, 60*time.Second)
	})

	t.Run("SLURM_NPROCS outside an allocation", func(t *testing.T) {
		cmd := c.command(nil, "srun", "-N1", "hostname")
		cmd.Dir = c.workDir()
		cmd.Env = append(cmd.Env, "SLURM_NPROCS=3")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("srun: %v %s", err, out)
		}
		if n := len(strings.Split(strings.TrimSpace(string(out)), "\n")); n != 3 {
			t.Errorf("%d tasks, want 3:\n%s", n, out)
		}
	})
}

// gpuList writes GPU indices as the environment does ("0,1").
func gpuList(gpus []int) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
