package srun

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// slurmSrunOptions are the long options of Slurm 22.05's srun
// (src/common/slurm_opt.c, those srun sets), every one of which srun
// must accept.
var slurmSrunOptions = []string{"accel-bind", "account", "acctg-freq", "bbf", "bcast", "bcast-exclude", "begin", "bb",
	"cluster-constraint", "chdir", "clusters", "cluster", "comment", "compress", "constraint", "container", "context",
	"contiguous", "core-spec", "cores-per-socket", "cpu-bind", "cpu_bind", "cpu-freq", "cpus-per-gpu", "cpus-per-task",
	"deadline", "debugger-test", "delay-boot", "dependency", "disable-status", "distribution", "epilog", "error",
	"exclude", "exclusive", "exact", "export", "extra-node-info", "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node",
	"gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help", "hint", "hold", "immediate", "input", "interactive",
	"jobid", "job-name", "kill-on-bad-exit", "label", "licenses", "mail-type", "mail-user", "threads", "mcs-label", "mem",
	"mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "mpi", "msg-timeout", "multi-prog", "network", "nice",
	"no-allocate", "no-kill", "nodefile", "nodelist", "nodes", "ntasks", "ntasks-per-core", "ntasks-per-node",
	"ntasks-per-socket", "ntasks-per-tres", "ntasks-per-gpu", "open-mode", "output", "overcommit", "overlap",
	"oversubscribe", "pack-group", "het-group", "partition", "power", "prefer", "preserve-env", "priority", "profile",
	"prolog", "propagate", "pty", "qos", "quiet", "quit-on-interrupt", "reboot", "relative", "reservation",
	"resv-ports", "send-libs", "signal", "slurmd-debug", "sockets-per-node", "spread-job", "switches", "task-epilog",
	"task-prolog", "tasks-per-node", "test-only", "thread-spec", "threads-per-core", "time", "time-min", "tmp", "uid",
	"unbuffered", "use-min-nodes", "usage", "verbose", "version", "wait", "wckey", "whole", "x11"}

// slurmSallocOptions are Slurm 22.05 salloc's long options.
var slurmSallocOptions = []string{"account", "acctg-freq", "bbf", "begin", "bb", "bell", "cluster-constraint", "chdir",
	"clusters", "cluster", "comment", "constraint", "container", "context", "contiguous", "core-spec", "cores-per-socket",
	"cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "exclude",
	"exclusive", "extra-node-info", "get-user-env", "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node",
	"gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help", "hint", "hold", "immediate", "job-name",
	"kill-command", "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu",
	"mincpus", "network", "nice", "no-bell", "no-kill", "no-shell", "nodefile", "nodelist", "nodes", "ntasks",
	"ntasks-per-core", "ntasks-per-node", "ntasks-per-socket", "ntasks-per-tres", "ntasks-per-gpu", "overcommit",
	"oversubscribe", "partition", "power", "prefer", "priority", "profile", "qos", "quiet", "reboot", "reservation",
	"signal", "sockets-per-node", "spread-job", "switches", "tasks-per-node", "thread-spec", "threads-per-core", "time",
	"time-min", "tmp", "uid", "use-min-nodes", "usage", "verbose", "version", "wait-all-nodes", "wckey", "x11"}

// TestOptionTables checks that srun and salloc take every option of
// Slurm 22.05's, that each option srun hands to sbatch's parser is one
// sbatch has, and that no name is in a table twice.
func TestOptionTables(t *testing.T) {
	for _, tc := range []struct {
		cmd   cmdSet
		names []string
	}{{forSrun, slurmSrunOptions}, {forSalloc, slurmSallocOptions}} {
		have := map[string]int{}
		for _, e := range tableOf(tc.cmd) {
			have[e.spec().Long]++
		}
		for _, n := range tc.names {
			if have[n] != 1 {
				t.Errorf("command %d: --%s is in its table %d times, want once", tc.cmd, n, have[n])
			}
		}
	}
	for _, s := range sharedOptions {
		if !opts.HasOption(s.long) {
			t.Errorf("--%s is handed to sbatch's parser, which does not have it", s.long)
		}
	}
}

// TestParseSrunOptions runs srun's own options (and those srun reads
// from sbatch's parser) through ParseArgs: each value accepted does what
// it says, each bad one gets Slurm's words.
func TestParseSrunOptions(t *testing.T) {
	in := ParseInput{Environ: []string{"HOME=/h"}, Cwd: "/work", Host: "login1", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	zero := 0
	tests := []struct {
		name    string
		args    []string
		check   func(a *Args) bool
		wantErr string // a line of the error
		usage   bool   // a syntax error (with the --help hint)
		fatal   string
	}{
		{name: "--exact", args: []string{"--exact", "x"}, check: func(a *Args) bool { return a.Exact && !a.Overlap }},
		{name: "--overlap", args: []string{"--overlap", "x"}, check: func(a *Args) bool { return a.Overlap && !a.Exact }},
		{name: "--overlap takes a hidden value", args: []string{"--overlap=force", "x"}, check: func(a *Args) bool { return a.Overlap }},
		{name: "--overlap after --exact wins", args: []string{"--exact", "--overlap", "x"}, check: func(a *Args) bool { return a.Overlap && !a.Exact }},
		{name: "--whole", args: []string{"-c2", "--whole", "x"}, check: func(a *Args) bool { return a.Whole && !a.Exact }},
		{name: "-O", args: []string{"-O", "-n8", "x"}, check: func(a *Args) bool { return a.Overcommit && len(a.Warnings) == 0 }},
		{name: "-O also overcommits the allocation", args: []string{"--overcommit", "-n65", "x"},
			check: func(a *Args) bool { return a.Spec.Overcommit && a.Spec.Tasks == 65 }},
		{name: "--mincpus and --tmp are the allocation's", args: []string{"--mincpus=4", "--tmp=1G", "x"},
			check: func(a *Args) bool { return a.Spec.MinCPUs == 4 && a.Spec.TmpDiskMB == 1024 && len(a.Warnings) == 0 }},
		{name: "--tmp=0 is any node", args: []string{"--tmp=0", "x"}, check: func(a *Args) bool { return a.Spec.TmpDiskMB == 0 && len(a.Warnings) == 0 }},
		{name: "bad --tmp", args: []string{"--tmp=big", "x"}, wantErr: "Invalid --tmp specification"},
		{name: "--mincpus=0", args: []string{"--mincpus=0", "x"}, wantErr: `Invalid numeric value "0" for --mincpus.`},
		{name: "-m cyclic", args: []string{"-m", "cyclic", "x"}, check: func(a *Args) bool { return a.Distribution == "cyclic" && len(a.Warnings) == 0 }},
		{name: "bad -m", args: []string{"-m", "zigzag", "x"}, wantErr: "distribution"},
		{name: "--cpu-bind=q", args: []string{"--cpu-bind=q", "x"}, check: func(a *Args) bool { return a.CPUBind == "q" }},
		{name: "--cpu_bind, OpenMPI's spelling", args: []string{"--cpu_bind=verbose,cores", "x"}, check: func(a *Args) bool { return a.CPUBind == "verbose,cores" }},
		{name: "--cpu-bind=map_cpu list", args: []string{"--cpu-bind=map_cpu:0,2", "x"}, check: func(a *Args) bool { return a.CPUBind == "map_cpu:0,2" }},
		{name: "--cpu-bind=help", args: []string{"--cpu-bind=help"}, check: func(a *Args) bool { return a.CPUBindHelp }},
		{name: "bad --cpu-bind", args: []string{"--cpu-bind=bogus", "x"}, wantErr: `unrecognized --cpu-bind argument "bogus"`, fatal: "Failed to parse --cpu-bind= values."},
		{name: "--gpu-bind=closest", args: []string{"--gpu-bind=closest", "x"}, check: func(a *Args) bool { return a.GPUBind == "closest" }},
		{name: "--gpu-bind=single:2", args: []string{"--gpu-bind", "single:2", "x"}, check: func(a *Args) bool { return a.GPUBind == "single:2" }},
		{name: "bad --gpu-bind", args: []string{"--gpu-bind=x", "x"}, wantErr: "Invalid --gpu-bind argument: gpu:x"},
		{name: "--mpi=none", args: []string{"--mpi=none", "x"}, check: func(a *Args) bool { return a.MPI == "none" }},
		{name: "--mpi=pmi2", args: []string{"--mpi", "pmi2", "x"}, check: func(a *Args) bool { return a.MPI == "pmi2" }},
		{name: "--mpi=list", args: []string{"--mpi=list"}, check: func(a *Args) bool { return a.MPIList }},
		{name: "unknown --mpi", args: []string{"--mpi=pmix", "x"}, wantErr: "Invalid MPI type 'pmix', --mpi=list for acceptable types"},
		{name: "--multi-prog", args: []string{"--multi-prog", "conf", "a"}, check: func(a *Args) bool { return a.MultiProg && a.Argv[0] == "conf" }},
		{name: "--task-prolog and --task-epilog", args: []string{"--task-prolog=/p", "--task-epilog", "/e", "x"},
			check: func(a *Args) bool { return a.TaskProlog == "/p" && a.TaskEpilog == "/e" }},
		{name: "--prolog=none", args: []string{"--prolog=/p", "--prolog=none", "--epilog=/e", "x"}, check: func(a *Args) bool { return a.Prolog == "" && a.Epilog == "/e" }},
		{name: "-W2", args: []string{"-W2", "x"}, check: func(a *Args) bool { return a.Wait == 2 }},
		{name: "--wait=0 is no limit", args: []string{"--wait=0", "x"}, check: func(a *Args) bool { return a.Wait == 0 }},
		{name: "no -W", args: []string{"x"}, check: func(a *Args) bool { return a.Wait == -1 }},
		{name: "bad --wait", args: []string{"--wait=-1", "x"}, wantErr: `Invalid numeric value "-1" for --wait.`},
		{name: "-W needs a value", args: []string{"-W"}, wantErr: "option requires an argument -- 'W'", usage: true},
		{name: "-I alone is one second", args: []string{"-I", "x"}, check: func(a *Args) bool { return a.Immediate == 1 }},
		{name: "--immediate=5", args: []string{"--immediate=5", "x"}, check: func(a *Args) bool { return a.Immediate == 5 }},
		{name: "-I5", args: []string{"-I5", "x"}, check: func(a *Args) bool { return a.Immediate == 5 }},
		{name: "bad --immediate", args: []string{"--immediate=soon", "x"}, wantErr: `Invalid numeric value "soon" for immediate.`},
		{name: "-r", args: []string{"-r", "1", "x"}, check: func(a *Args) bool { return a.Relative != nil && *a.Relative == 1 }},
		{name: "-r 0", args: []string{"--relative=0", "x"}, check: func(a *Args) bool { return cmp.Equal(a.Relative, &zero) }},
		{name: "bad --relative", args: []string{"-r", "x", "y"}, wantErr: `Invalid numeric value "x" for --relative.`},
		{name: "-E", args: []string{"-E", "x"}, check: func(a *Args) bool { return a.PreserveEnv }},
		{name: "-Z", args: []string{"-Z", "x"}, check: func(a *Args) bool { return a.NoAllocate }},
		{name: "-X", args: []string{"-X", "x"}, check: func(a *Args) bool { return a.DisableStatus }},
		{name: "--quit-on-interrupt", args: []string{"--quit-on-interrupt", "x"}, check: func(a *Args) bool { return a.QuitOnInterrupt }},
		{name: "-l -u bundled", args: []string{"-lu", "x"}, check: func(a *Args) bool { return a.Label && a.Unbuffered }},
		{name: "-K", args: []string{"-K", "x"}, check: func(a *Args) bool { return a.KillBadEx }},
		{name: "-K0", args: []string{"-K0", "x"}, check: func(a *Args) bool { return !a.KillBadEx }},
		{name: "bad -K", args: []string{"--kill-on-bad-exit=y", "x"}, wantErr: `Invalid numeric value "y" for --kill-on-bad-exit.`},
		{name: "-v -v counts", args: []string{"-vv", "x"}, check: func(a *Args) bool { return a.Verbose == 2 }},
		{name: "-Q", args: []string{"-Q", "x"}, check: func(a *Args) bool { return a.Quiet }},
		{name: "--test-only", args: []string{"--test-only", "x"}, check: func(a *Args) bool { return a.TestOnly }},
		{name: "--open-mode=append", args: []string{"--open-mode=a", "x"}, check: func(a *Args) bool { return a.Spec.OpenMode == "append" }},
		{name: "bad --open-mode", args: []string{"--open-mode=x", "y"}, wantErr: "Invalid --open-mode argument: x."},
		{name: "-T", args: []string{"-T", "4", "x"}, check: func(a *Args) bool { return len(a.Warnings) == 0 }},
		{name: "bad -T", args: []string{"-T", "0", "x"}, wantErr: `Invalid numeric value "0" for --threads.`},
		{name: "--msg-timeout", args: []string{"--msg-timeout=30", "x"}, check: func(a *Args) bool { return true }},
		{name: "bad --msg-timeout", args: []string{"--msg-timeout=0", "x"}, wantErr: `Invalid numeric value "0" for --msg-timeout.`},
		{name: "--slurmd-debug", args: []string{"--slurmd-debug=verbose", "x"}, check: func(a *Args) bool { return a.SlurmdDebug == "verbose" }},
		{name: "--slurmd-debug number", args: []string{"--slurmd-debug=5", "x"}, check: func(a *Args) bool { return a.SlurmdDebug == "debug" }},
		{name: "--debugger-test", args: []string{"--debugger-test", "x"}, check: func(a *Args) bool { return a.DebuggerTest }},
		{name: "bad --slurmd-debug", args: []string{"--slurmd-debug=loud", "x"}, wantErr: "Invalid --slurmd-debug specification: loud"},
		{name: "--accel-bind", args: []string{"--accel-bind=g", "x"}, check: func(a *Args) bool { return len(a.Warnings) == 1 }},
		{name: "bad --accel-bind", args: []string{"--accel-bind=z", "x"}, wantErr: "Invalid --accel-bind specification"},
		{name: "--bcast", args: []string{"--bcast", "x"}, check: func(a *Args) bool { return len(a.Warnings) == 1 }},
		{name: "--compress", args: []string{"--compress=lz4", "x"}, check: func(a *Args) bool { return true }},
		{name: "bad --compress", args: []string{"--compress=rar", "x"}, wantErr: "Invalid --compress specification: rar"},
		{name: "--send-libs=no", args: []string{"--send-libs=no", "x"}, check: func(a *Args) bool { return true }},
		{name: "bad --send-libs", args: []string{"--send-libs=maybe", "x"}, wantErr: "Invalid --send-libs specification"},
		{name: "--resv-ports", args: []string{"--resv-ports=2", "x"}, check: func(a *Args) bool { return true }},
		{name: "--het-group=0", args: []string{"--het-group=0", "x"}, check: func(a *Args) bool { return true }},
		{name: "--het-group=1", args: []string{"--het-group=1", "x"}, wantErr: "Invalid --het-group value: 1"},
		{name: "--x11", args: []string{"--x11", "x"}, check: func(a *Args) bool { return len(a.Warnings) == 1 }},
		{name: "bad --x11", args: []string{"--x11=some", "x"}, wantErr: "Invalid --x11 specification: some"},
		{name: "--debugger-test", args: []string{"--debugger-test", "x"}, check: func(a *Args) bool { return true }},
		{name: "--pty", args: []string{"--pty", "bash"}, check: func(a *Args) bool { return a.Pty }},
		{name: "--jobid", args: []string{"--jobid=12", "x"}, check: func(a *Args) bool { return a.JobID == 12 }},
		{name: "--gpus-per-task with --gpus", args: []string{"--gpus=4", "--gpus-per-task=2", "x"}, check: func(a *Args) bool { return a.Spec.GPUs == 4 && a.Spec.GPUsPerTask == 2 }},
		{name: "--mem within a step", args: []string{"--mem=2G", "x"}, check: func(a *Args) bool { return a.Spec.MemPerNodeMB == 2048 }},
		{name: "-w", args: []string{"-w", "gpu[01-02]", "x"}, check: func(a *Args) bool { return cmp.Equal(a.Spec.NodeList, []string{"gpu01", "gpu02"}) }},
		{name: "--tasks-per-node, Slurm's alias", args: []string{"--tasks-per-node=3", "x"}, check: func(a *Args) bool { return a.Spec.TasksPerNode == 3 }},
		{name: "an abbreviation of srun's own option", args: []string{"--multi", "conf"}, check: func(a *Args) bool { return a.MultiProg }},
		{name: "an ambiguous abbreviation", args: []string{"--ta", "x"}, wantErr: "option '--ta' is ambiguous", usage: true},
		{name: "an sbatch option srun lacks", args: []string{"--array=1-3", "x"}, wantErr: "unrecognized option '--array=1-3'", usage: true},
		{name: "sbatch's --wrap", args: []string{"--wrap=x"}, wantErr: "unrecognized option '--wrap=x'", usage: true},
		{name: "salloc's --no-shell", args: []string{"--no-shell", "x"}, wantErr: "unrecognized option '--no-shell'", usage: true},
		{name: "--help wins over a later mistake", args: []string{"--help", "--bogus"}, check: func(a *Args) bool { return a.Help }},
		{name: "--usage", args: []string{"--usage"}, check: func(a *Args) bool { return a.Usage }},
		{name: "-V", args: []string{"-V"}, check: func(a *Args) bool { return a.Version }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseArgs(tt.args, in)
			if tt.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Usage != tt.usage || pe.Fatal != tt.fatal || !containsLine(pe.Lines, tt.wantErr) {
					t.Fatalf("err = %#v, want a line containing %q (usage %v, fatal %q)", err, tt.wantErr, tt.usage, tt.fatal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(a) {
				t.Fatalf("args %+v", a)
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// TestParseSallocOptions checks salloc's own options and that srun's
// are not salloc's.
func TestParseSallocOptions(t *testing.T) {
	in := ParseInput{Cwd: "/work", Salloc: true}
	tests := []struct {
		name    string
		args    []string
		check   func(a *Args) bool
		wantErr string
	}{
		{name: "--no-shell", args: []string{"--no-shell", "-N2"}, check: func(a *Args) bool { return a.NoShell && a.Spec.Nodes == 2 && len(a.Argv) == 0 }},
		{name: "-K alone is SIGTERM", args: []string{"-K", "bash"}, check: func(a *Args) bool { return a.KillCommand == 15 }},
		{name: "--kill-command=KILL", args: []string{"--kill-command=KILL"}, check: func(a *Args) bool { return a.KillCommand == 9 }},
		{name: "bad -K", args: []string{"-KNOPE"}, wantErr: "Invalid signal name: NOPE"},
		{name: "--bell then --no-bell", args: []string{"--bell", "--no-bell"}, check: func(a *Args) bool { return a.NoBell && !a.Bell }},
		{name: "-I", args: []string{"-I3"}, check: func(a *Args) bool { return a.Immediate == 3 }},
		{name: "--gpu-bind is sbatch's check", args: []string{"--gpu-bind=closest"}, check: func(a *Args) bool { return true }},
		{name: "--wait-all-nodes", args: []string{"--wait-all-nodes=1"}, check: func(a *Args) bool { return true }},
		{name: "srun's --label", args: []string{"--label"}, wantErr: "unrecognized option '--label'"},
		{name: "srun's -o", args: []string{"-o", "x"}, wantErr: "invalid option -- 'o'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseArgs(tt.args, in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(a) {
				t.Fatalf("args %+v", a)
			}
		})
	}
}

// TestHelpAndUsage checks the shapes Slurm's test suite reads.
func TestHelpAndUsage(t *testing.T) {
	var b bytes.Buffer
	WriteUsage(&b, false)
	if !regexp.MustCompile(`^Usage: srun (?:\[-{1,2}.*?\]\s+)+executable \[args\.\.\.\]$`).MatchString(strings.TrimSuffix(b.String(), "\n")) {
		t.Errorf("srun --usage:\n%s", b.String())
	}
	b.Reset()
	WriteUsage(&b, true)
	// Slurm's test suite: `Usage: salloc(?:\s+\[{1,2}-{1,2}.*?\](?=\s+\[))+\s+\[command \[args\.\.\.\]\]$`;
	// Go's regexp has no lookahead, so the items are checked one by one.
	u := strings.TrimSuffix(b.String(), "\n")
	mid, ok := strings.CutPrefix(u, "Usage: salloc ")
	if mid, ok2 := strings.CutSuffix(mid, " [command [args...]]"); !ok || !ok2 {
		t.Errorf("salloc --usage:\n%s", u)
	} else {
		for _, item := range regexp.MustCompile(`\]\s+\[`).Split(strings.TrimSpace(mid), -1) {
			if !strings.HasPrefix(strings.TrimLeft(item, "["), "-") {
				t.Errorf("salloc --usage item %q does not start with an option", item)
			}
		}
	}
	b.Reset()
	WriteHelp(&b, false)
	for _, want := range []string{"Usage: srun [OPTIONS(0)...", "  -b, --begin=time", "  -N, --nodes=N", "  -q, --qos=qos", "      --mincpus=n",
		"  -G, --gpus=n", "      --exact", "      --overlap", "  -W, --wait=sec", "      --cpu-bind=type", "      --multi-prog"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("srun --help lacks %q", want)
		}
	}
	if strings.Contains(b.String(), "cpu_bind") || strings.Contains(b.String(), "pack-group") {
		t.Errorf("srun --help shows a hidden alias")
	}
}

func TestParseMultiProg(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		ntasks  int
		args    []string
		want    [][]string
		wantErr string
	}{
		{name: "ranks, ranges and the rest", conf: "# comment\n0 prog zero\n1-2,4 prog %t %o\n* other %t\n", ntasks: 6,
			want: [][]string{{"prog", "zero"}, {"prog", "1", "0"}, {"prog", "2", "1"}, {"other", "3"}, {"prog", "4", "2"}, {"other", "5"}}},
		{name: "the task count from the ranks", conf: "0-1 a\n2 b\n",
			want: [][]string{{"a"}, {"a"}, {"b"}}},
		{name: "quotes, escapes and a joined line", conf: "0 echo 'a b' c\\ d \\\n  e%t\n", ntasks: 1,
			want: [][]string{{"echo", "a b", "c d", "e0"}}},
		{name: "extra arguments follow", conf: "* run\n", ntasks: 2, args: []string{"x"},
			want: [][]string{{"run", "x"}, {"run", "x"}}},
		{name: "a task without a line", conf: "0 a\n2 b\n", ntasks: 3, wantErr: "Configuration file c invalid, no record for task id 1"},
		{name: "a task twice", conf: "0-1 a\n1 b\n", wantErr: "Duplicate record for task 1"},
		{name: "a rank past -n", conf: "0-4 a\n", ntasks: 2, wantErr: "Invalid task id, 4 >= ntasks"},
		{name: "asterisk not last", conf: "* a\n0 b\n", ntasks: 1, wantErr: "Task range specification with asterisk must be last"},
		{name: "no program", conf: "0\n", wantErr: "Line 1 of configuration file c invalid"},
		{name: "bad range", conf: "1-x a\n", wantErr: "Invalid task range specification (1-x)"},
		{name: "reversed range", conf: "3-1 a\n", wantErr: "Invalid task range, 3-1"},
		{name: "unclosed quote", conf: "0 echo 'a\n", wantErr: "Line 1 of configuration file c invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMultiProg(tt.conf, "c", tt.ntasks, tt.args)
			if tt.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !containsLine(pe.Lines, tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

// busyAPI answers CreateStep busy a number of times, then grants.
type busyAPI struct {
	*clitest.FakeAPI
	mu    sync.Mutex
	busy  int
	calls int
}

func (b *busyAPI) CreateStep(_ context.Context, id uint64, _ api.StepRequest) (api.StepResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls <= b.busy {
		return api.StepResponse{}, api.Errorf(api.ErrConflict, "Unable to create step for job %d: %s", id, api.StepBusy)
	}
	return api.StepResponse{CA: "granted"}, nil
}
func (b *busyAPI) EndStep(context.Context, uint64, uint32, api.StepEnd) error { return nil }
func (b *busyAPI) Release(context.Context, uint64, api.ExitStatus) error      { return nil }

func TestCreateStepWaits(t *testing.T) {
	tests := []struct {
		name      string
		busy      int
		immediate int
		signal    bool
		wantErr   string
		wantOut   []string
	}{
		{name: "granted at once", busy: 0},
		{name: "waits, then gets it", busy: 2,
			wantOut: []string{"srun: Job 12 step creation temporarily disabled, retrying (Requested nodes are busy)", "srun: Step created for job 12"}},
		{name: "--immediate gives up at once", busy: 5, immediate: 1, wantErr: "Unable to create step for job 12: Requested nodes are busy"},
		{name: "a signal gives up", busy: 1000, signal: true, wantErr: errStepCancelled.Error(),
			wantOut: []string{"srun: Job 12 step creation temporarily disabled, retrying (Requested nodes are busy)", "srun: Cancelled pending step for job 12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &busyAPI{FakeAPI: &clitest.FakeAPI{}, busy: tt.busy}
			sigs := make(chan os.Signal, 1)
			if tt.signal {
				go func() { time.Sleep(20 * time.Millisecond); sigs <- syscall.SIGINT }()
			}
			var errOut bytes.Buffer
			resp, err := createStep(context.Background(), c, 12, api.StepRequest{}, tt.immediate, &errOut, sigs, time.Millisecond)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil || resp.CA != "granted" {
				t.Fatalf("resp %+v, err %v", resp, err)
			}
			var lines []string
			if s := strings.TrimSpace(errOut.String()); s != "" {
				lines = strings.Split(s, "\n")
			}
			if diff := cmp.Diff(tt.wantOut, lines); diff != "" {
				t.Fatalf("stderr (-want +got)\n%s", diff)
			}
		})
	}
}

func TestJobLine(t *testing.T) {
	j := &api.Job{ID: 42, Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4}, {Node: "gpu02", CPUs: 4}, {Node: "gpu03", CPUs: 2}}}
	want := "jobid 42: nodes(3):`gpu[01-03]', cpu counts: 4(x2),2(x1)"
	if got := JobLine(j); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestVerboseDefined(t *testing.T) {
	a, err := ParseArgs([]string{"-v", "-N2", "--exact", "-l", "x"}, ParseInput{Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	newVerbose(&b, a).defined(a.Defined)
	want := `srun: defined options
srun: -------------------- --------------------
srun: exact               : set
srun: label               : set
srun: nodes               : 2
srun: verbose             : 1
srun: -------------------- --------------------
srun: end of defined options
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	a.Quiet = true
	newVerbose(&b, a).defined(a.Defined)
	if b.Len() != 0 {
		t.Fatalf("-Q still printed %q", b.String())
	}
}

// TestRunStepWait checks -W: the first task's end starts the clock, and
// when it runs out srun reports the tasks' state and kills the rest.
func TestRunStepWait(t *testing.T) {
	n := &fakeNode{}
	n = newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) {
		w.Write(exitFrame(0, api.ExitStatus{}))
		n.record(c, func(f stepio.Frame) bool { return f.Type == stepio.Signal })
		w.Write(exitFrame(1, api.ExitStatus{Signal: 9}))
	})
	sg := grantFor(t, n)
	g, _ := stepio.Decode(sg)
	g.NTasks = 2
	g.Nodes[0].Ranks = []int{0, 1}
	sg = resign(t, g)
	var stderr bytes.Buffer
	res, err := runStep(context.Background(), sg, stepOptions{stdin: "none", out: &bytes.Buffer{}, errOut: &stderr, wait: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"srun: First task exited 1s ago\n", "srun: StepId=5.0 task 1: running\n", "srun: StepId=5.0 task 0: exited\n",
		"srun: error: n1: task 1: Killed\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	n.mu.Lock()
	last := n.got[len(n.got)-1]
	n.mu.Unlock()
	if sig, _ := stepio.ParseSignal(last.Payload); sig != int(syscall.SIGKILL) || res.code != 137 {
		t.Fatalf("node got %v, srun code %d", last, res.code)
	}
}

// TestRunStepCancelNotice checks that a node's notice of a cancelled
// step (scancel J.S) is printed as it is, with srun's own line, and
// makes the step's end a cancel.
func TestRunStepCancelNotice(t *testing.T) {
	n := newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) {
		w.Write(stepio.Frame{Type: stepio.Notice, Task: stepio.NoticeCancelled, Payload: []byte("slurmstepd: error: *** STEP 5.0 ON n1 CANCELLED AT 2026-01-01T00:00:00 ***\n")})
		w.Write(exitFrame(0, api.ExitStatus{Signal: 9}))
	})
	var stderr bytes.Buffer
	var v bytes.Buffer
	res, err := runStep(context.Background(), grantFor(t, n), stepOptions{stdin: "none", out: &bytes.Buffer{}, errOut: &stderr,
		verbose: &verbose{w: &v, level: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slurmstepd: error: *** STEP 5.0 ON n1 CANCELLED AT 2026-01-01T00:00:00 ***\n",
		"srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if !res.cancelled {
		t.Errorf("result %+v, want cancelled", res)
	}
	for _, want := range []string{"srun: launching StepId=5.0 on host n1, 1 tasks: 0\n", "srun: launch/slurm: _task_start: Node n1, 1 tasks started\n",
		"srun: launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=5.0 (status=0x0009).\n"} {
		if !strings.Contains(v.String(), want) {
			t.Errorf("-v lacks %q:\n%s", want, v.String())
		}
	}
}

// TestStepRequest checks what srun asks the controller for from its
// options.
func TestStepRequest(t *testing.T) {
	a, err := ParseArgs([]string{"-n4", "--exclusive", "--gpus=2", "--mem=1G", "-w", "gpu01", "-x", "gpu02", "-r", "0",
		"-m", "cyclic", "--gpu-bind=single:2", "--cpu-bind=cores", "--mpi=pmi2", "-E", "-t", "5", "--task-prolog=/p", "x"}, ParseInput{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	req := stepRequest(a, nil, false, "login1")
	zero := 0
	want := api.StepRequest{Argv: []string{"x"}, Name: "x", Tasks: 4, Cwd: "/w", Exact: true, GPUs: 2, MemPerNodeMB: 1024,
		NodeList: []string{"gpu01"}, Exclude: []string{"gpu02"}, Relative: &zero, Distribution: "cyclic", TimeLimit: 300,
		GPUBind: "single:2", CPUBind: "cores", MPI: "pmi2", PreserveEnv: true, TaskProlog: "/p", SrunHost: "login1", SrunPID: os.Getpid()}
	req.Env = nil
	if diff := cmp.Diff(want, req); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	// Its own allocation's limit is the job's, not the step's.
	if req := stepRequest(a, nil, true, "login1"); req.TimeLimit != 0 {
		t.Fatalf("step in srun's own allocation: time limit %d", req.TimeLimit)
	}
}

// resign signs g as grantFor does.
func resign(t *testing.T, g *api.StepGrant) api.SignedGrant {
	t.Helper()
	sg, err := stepcred.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))).Sign(g)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

func TestPerTaskPattern(t *testing.T) {
	for p, want := range map[string]bool{"in-%t": true, "in-%3t": true, "%N.in": true, "node-%n": true, "in-%j": false,
		"in-%%t": false, "plain": false, "%%%t": true} {
		if got := perTask(p); got != want {
			t.Errorf("perTask(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestOvercommitFromEnvironment: SLURM_OVERCOMMIT (set in an
// overcommitted job's environment) overcommits srun's step and
// allocation alike, and "0" reads as off.
func TestOvercommitFromEnvironment(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"1", true}, {"", true}, {"0", false}} {
		env := []string{"SLURM_OVERCOMMIT=" + tt.v}
		a, err := ParseArgs([]string{"-n9", "true"}, ParseInput{Environ: env, Cwd: "/w", EnvVars: SrunEnvVars(env)})
		if err != nil {
			t.Fatalf("SLURM_OVERCOMMIT=%s: %v", tt.v, err)
		}
		if a.Overcommit != tt.want || a.Spec.Overcommit != tt.want {
			t.Errorf("SLURM_OVERCOMMIT=%s: step %v, allocation %v, want %v", tt.v, a.Overcommit, a.Spec.Overcommit, tt.want)
		}
	}
}
