package steps

// What tided does for each task of a step beyond starting it (issue
// 22): the task's own command (--multi-prog), its CPU binding
// (--cpu-bind, by sched_setaffinity while the task waits at its gate),
// its GPU binding report (--gpu-bind=verbose; the GPUs themselves come
// from the grant), the task prolog (run by the task itself before it
// execs its command, its "export NAME=value" lines setting its
// environment) and the task epilog (run by tided after the task, its
// output the task's), and the MPI environment (--mpi=pmi2).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/envlist"
	"github.com/tide-hpc/tide/noded/jobenv"
)

// taskArgv is the command of task rank: its --multi-prog line, else the
// step's command.
func taskArgv(g *api.StepGrant, rank int) []string {
	if rank >= 0 && rank < len(g.TaskArgv) && len(g.TaskArgv[rank]) > 0 {
		return g.TaskArgv[rank]
	}
	return g.Argv
}

// withTaskExtras adds to local task k's environment what the step's
// binding and MPI options give it: SLURM_CPU_BIND* for --cpu-bind, the
// node and task counts of srun's environment for -E,
// SLURM_MPI_TYPE and, for pmi2, PMI_JOBID, PMI_RANK and PMI_SIZE. Tide
// runs no PMI2 server, so PMI_FD is not set: a PMI2 client then starts
// as a singleton. It is pure.
func withTaskExtras(g *api.StepGrant, node, k int, env []string) []string {
	if g.CPUBind == "" && g.MPI == "" && !g.PreserveEnv {
		return env
	}
	e := envlist.FromEntries(env)
	ours := envlist.New(8)
	if g.CPUBind != "" {
		b, err := api.ParseCPUBind(g.CPUBind)
		if err == nil {
			verbose := "quiet"
			if b.Verbose {
				verbose = "verbose"
			}
			kind := b.Kind
			if kind == "" {
				kind = b.Unit
			}
			list := make([]string, len(b.List))
			for i, x := range b.List {
				if strings.HasPrefix(b.Kind, "mask") {
					list[i] = "0x" + strconv.FormatUint(x, 16)
				} else {
					list[i] = strconv.FormatUint(x, 10)
				}
			}
			typ := kind
			if len(list) > 0 {
				typ += ":"
			}
			ours.Set("SLURM_CPU_BIND", verbose+","+typ+strings.Join(list, ","))
			ours.Set("SLURM_CPU_BIND_VERBOSE", verbose)
			ours.Set("SLURM_CPU_BIND_TYPE", typ)
			ours.Set("SLURM_CPU_BIND_LIST", strings.Join(list, ","))
		}
	}
	if g.MPI != "" {
		ours.Set("SLURM_MPI_TYPE", g.MPI)
	}
	if g.PreserveEnv {
		// -E: the counts srun's environment had, not the step's.
		from := envlist.FromEntries(g.Env)
		for _, k := range []string{"SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS"} {
			if kv, ok := from.Entry(k); ok {
				ours.SetEntry(k, kv)
			}
		}
	}
	jobenv.MergeWithTwins(e, ours)
	if g.MPI == "pmi2" {
		sn := g.Nodes[node]
		e.Set("PMI_JOBID", g.ID())
		e.Set("PMI_RANK", strconv.Itoa(sn.Ranks[k]))
		e.Set("PMI_SIZE", strconv.Itoa(g.NTasks))
	}
	return e.Entries()
}

// taskCPUs is the CPU set local task k of n on this node binds to under
// b (nil: no binding), chosen among avail, the CPUs tided may use
// (ascending). cpt is the CPUs each task asked for; topo tells sockets
// and NUMA domains. It is pure.
func taskCPUs(b api.CPUBind, k, n, cpt int, avail []int, topo cpuTopology) []int {
	if len(avail) == 0 || b.Kind == "none" || b.Kind == "" && b.Unit == "" {
		return nil
	}
	cpt = max(cpt, 1)
	chunk := func() []int {
		var out []int
		for i := range cpt {
			out = append(out, avail[(k*cpt+i)%len(avail)])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	switch b.Kind {
	case "rank":
		return []int{avail[k%len(avail)]}
	case "map_cpu":
		return []int{int(b.List[k%len(b.List)])}
	case "mask_cpu":
		return maskCPUs(b.List[k%len(b.List)])
	case "rank_ldom":
		doms := topo.domains()
		if len(doms) == 0 {
			return chunk()
		}
		return topo.ldom[doms[k%len(doms)]]
	case "map_ldom":
		return topo.ldom[int(b.List[k%len(b.List)])]
	case "mask_ldom":
		var out []int
		for _, d := range maskCPUs(b.List[k%len(b.List)]) {
			out = append(out, topo.ldom[d]...)
		}
		slices.Sort(out)
		return out
	}
	c := chunk()
	switch b.Unit {
	case "sockets":
		return topo.widen(c, topo.socket)
	case "ldoms":
		return topo.widen(c, topo.ldomOf)
	}
	return c
}

// maskCPUs lists the bits set in m.
func maskCPUs(m uint64) []int {
	var out []int
	for i := range 64 {
		if m&(1<<i) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// cpuTopology is the node's sockets and NUMA domains, by CPU.
type cpuTopology struct {
	socket map[int]int   // cpu -> socket
	ldomOf map[int]int   // cpu -> NUMA node
	ldom   map[int][]int // NUMA node -> cpus
}

func (t cpuTopology) domains() []int {
	var out []int
	for d := range t.ldom {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// widen grows cpus to every CPU that shares a group (a socket, a NUMA
// node) with one of them.
func (t cpuTopology) widen(cpus []int, group map[int]int) []int {
	want := map[int]bool{}
	for _, c := range cpus {
		if g, ok := group[c]; ok {
			want[g] = true
		}
	}
	var out []int
	for c, g := range group {
		if want[g] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return cpus
	}
	slices.Sort(out)
	return out
}

// readCPUTopology reads sockets and NUMA nodes from sysfs under root
// ("/sys"); what it cannot read stays empty.
func readCPUTopology(root string) cpuTopology {
	t := cpuTopology{socket: map[int]int{}, ldomOf: map[int]int{}, ldom: map[int][]int{}}
	cpus, _ := filepath.Glob(filepath.Join(root, "devices/system/cpu/cpu[0-9]*"))
	for _, dir := range cpus {
		c, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "cpu"))
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, "topology/physical_package_id")); err == nil {
			if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				t.socket[c] = s
			}
		}
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "devices/system/node/node[0-9]*"))
	for _, dir := range nodes {
		d, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "cpulist"))
		if err != nil {
			continue
		}
		list, err := parseCPUList(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		t.ldom[d] = list
		for _, c := range list {
			t.ldomOf[c] = d
		}
	}
	return t
}

// parseCPUList reads a kernel CPU list: "0-3,8,10-11" ("" is none).
func parseCPUList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// usableCPUs are the CPUs tided itself may run on, ascending.
func usableCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var out []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// bindTask sets pid's CPU affinity to cpus (pid waits at its gate, so
// its command and everything it starts inherit it).
func bindTask(pid int, cpus []int) error {
	var set unix.CPUSet
	set.Zero()
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("CPU %d out of range", c)
		}
		set.Set(c)
	}
	return unix.SchedSetaffinity(pid, &set)
}

// cpuMaskHex is a CPU set as Slurm prints masks: hex, no leading zeros.
func cpuMaskHex(cpus []int) string {
	if len(cpus) == 0 {
		return "0"
	}
	hi := slices.Max(cpus)
	digits := make([]byte, hi/4+1)
	for i := range digits {
		digits[i] = '0'
	}
	for _, c := range cpus {
		i := len(digits) - 1 - c/4
		v := digits[i] - '0'
		if v > 9 {
			v = digits[i] - 'a' + 10
		}
		v |= 1 << (c % 4)
		digits[i] = "0123456789abcdef"[v]
	}
	return string(digits)
}

// cpuBindLine is Slurm's --cpu-bind=verbose report of one task:
// "cpu-bind-cores=MASK - gpu01, task  0  0 [4242]: mask 0x3 set".
func cpuBindLine(b api.CPUBind, node string, rank, local, pid int, cpus []int, failed bool) string {
	units, typ, action := "", "NULL", ""
	switch b.Unit {
	case "threads", "cores", "sockets", "ldoms":
		units = "-" + b.Unit
	}
	switch b.Kind {
	case "none":
		typ, units = "NONE", ""
	case "rank":
		typ, action = "RANK", " set"
	case "map_cpu":
		typ, action = "MAP ", " set"
	case "mask_cpu":
		typ, action = "MASK", " set"
	case "rank_ldom":
		typ, action = "LDRANK", " set"
	case "map_ldom":
		typ, action = "LDMAP ", " set"
	case "mask_ldom":
		typ, action = "LDMASK", " set"
	default:
		if b.Unit != "" {
			typ, action = "MASK", " set"
		}
	}
	status := ""
	if failed {
		status = " FAILED"
	}
	return fmt.Sprintf("cpu-bind%s=%s - %s, task %2d %2d [%d]: mask 0x%s%s%s\n", units, typ, node, rank, local, pid, cpuMaskHex(cpus), action, status)
}

// gpuBindLine is Slurm's --gpu-bind=verbose report of one task's GPUs
// among the step's on the node.
func gpuBindLine(stepGPUs, taskGPUs []int, local int) string {
	var usable, alloc uint64
	var local2 []string
	for i, g := range stepGPUs {
		alloc |= 1 << i
		if slices.Contains(taskGPUs, g) {
			usable |= 1 << i
			local2 = append(local2, strconv.Itoa(len(local2)))
		}
	}
	return fmt.Sprintf("gpu-bind: usable_gres=0x%X; bit_alloc=0x%X; local_inx=%d; global_list=%s; local_list=%s\n",
		usable, alloc, local, gres.FormatIndices(taskGPUs), strings.Join(local2, ","))
}

// taskPrologScript runs a task prolog ($0) inside the task before its
// command ("$@"), as Slurm's slurmstepd does in the task: the prolog's
// "export NAME=value" lines set the task's environment, "unset NAME"
// clears, "print text" writes text to the task's standard output; a
// prolog that fails ends the task with its status.
const taskPrologScript = `out=$("$0" </dev/null); rc=$?
if [ $rc -ne 0 ]; then echo "slurmstepd: error: TaskProlog failed status=$rc" >&2; exit $rc; fi
while IFS= read -r l; do
  case $l in
  'print '*) t=${l#print }; t=${t#"${t%%[! 	]*}"}; printf '%s\n' "$t" ;;
  'export '*) kv=${l#export }; kv=${kv#"${kv%%[! 	]*}"}; n=${kv%%=*}
    [ "$n" = "$kv" ] && continue
    v=${kv#*=}; n=${n%"${n##*[! 	]}"}
    case $n in ''|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
    export "$n=$v" ;;
  'unset '*) n=${l#unset }; n=${n#"${n%%[! 	]*}"}; n=${n%"${n##*[! 	]}"}
    case $n in ''|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
    unset "$n" ;;
  esac
done <<TIDE_TASK_PROLOG_EOF
$out
TIDE_TASK_PROLOG_EOF
exec "$@"`

// withTaskProlog rewrites cmd to run prolog first, inside the task (see
// taskPrologScript). It returns cmd.
func withTaskProlog(cmd *exec.Cmd, prolog string) *exec.Cmd {
	cmd.Args = append([]string{"sh", "-c", taskPrologScript, prolog, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	return cmd
}

// epilogTimeout bounds a task epilog, which holds up the task's exit.
const epilogTimeout = 5 * time.Minute

// epilogOutputGrace is how long a task epilog's output is still read
// after the epilog and its process group are gone.
const epilogOutputGrace = 2 * time.Second

// runTaskEpilog runs a step's task epilog after one of its tasks ended,
// as the task's user, in its directory and environment, its output
// going to out and errw (the task's streams). Failures are reported on
// errw, as Slurm's slurmstepd reports them; the task's exit stands.
// Once the epilog itself exits, whatever it left running in its process
// group is killed (slurmstepd does the same), and its output is read to
// the end only after that: a child left in the background holding the
// output open must not hold up the task's end.
func runTaskEpilog(epilog, cwd string, env []string, cred *syscall.Credential, out, errw io.Writer) {
	path := epilog
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), epilogTimeout)
	defer cancel()
	or, ow, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(errw, "slurmstepd: error: TaskEpilog %s failed: %v\n", epilog, err)
		return
	}
	er, ew, err := os.Pipe()
	if err != nil {
		or.Close()
		ow.Close()
		fmt.Fprintf(errw, "slurmstepd: error: TaskEpilog %s failed: %v\n", epilog, err)
		return
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Dir, cmd.Env = cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = ow, ew
	var stderr bytes.Buffer
	var copied sync.WaitGroup
	copied.Add(2)
	go func() { defer copied.Done(); _, _ = io.Copy(out, or) }()
	go func() { defer copied.Done(); _, _ = io.Copy(&stderr, er) }()
	err = cmd.Start()
	ow.Close()
	ew.Close()
	if err == nil {
		pgid := cmd.Process.Pid
		err = cmd.Wait()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	// A child that left the group (setsid) may still hold the pipes:
	// its output is cut after a short grace, not waited for.
	done := make(chan struct{})
	go func() { copied.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(epilogOutputGrace):
	}
	or.Close()
	er.Close()
	<-done
	_, _ = errw.Write(stderr.Bytes())
	if err != nil {
		fmt.Fprintf(errw, "slurmstepd: error: TaskEpilog %s failed: %v\n", epilog, err)
	}
}
