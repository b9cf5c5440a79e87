package srun

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/internal/stepio"
)

func TestParseArgs(t *testing.T) {
	in := ParseInput{Environ: []string{"HOME=/h", "PATH=/bin"}, Cwd: "/work", Host: "login1", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	type got struct {
		Argv                               []string
		Nodes, Tasks, PerNode, CPUs, GPUsT int
		Label, Kill, Pty, Unbuf            bool
		JobID                              uint64
		Name, Out, Partition, WorkDir      string
	}
	tests := []struct {
		name    string
		args    []string
		want    got
		wantErr string
	}{
		{name: "label and hostname", args: []string{"-l", "hostname"},
			want: got{Argv: []string{"hostname"}, Label: true, Name: "hostname", WorkDir: "/work"}},
		{name: "resource options and the command's own flags", args: []string{"-N2", "--ntasks-per-node=4", "-c", "2", "--label", "python", "-l", "x.py"},
			want: got{Argv: []string{"python", "-l", "x.py"}, Nodes: 2, PerNode: 4, CPUs: 2, Label: true, Name: "python", WorkDir: "/work"}},
		{name: "gpus per task", args: []string{"--gpus-per-task=1", "-n", "16", "./train.sh"},
			want: got{Argv: []string{"./train.sh"}, Tasks: 16, GPUsT: 1, Name: "train.sh", WorkDir: "/work"}},
		{name: "gpus per task alone takes the job's task layout", args: []string{"-l", "--gpus-per-task", "1", "bash", "-c", "echo"},
			want: got{Argv: []string{"bash", "-c", "echo"}, GPUsT: 1, Label: true, Name: "bash", WorkDir: "/work"}},
		{name: "bad gpus per task", args: []string{"--gpus-per-task=x", "true"}, wantErr: "Invalid --gpus-per-task specification: x"},
		{name: "srun's own options between sbatch ones", args: []string{"-p", "gpu", "-K", "--pty", "-u", "-t", "5", "bash"},
			want: got{Argv: []string{"bash"}, Kill: true, Pty: true, Unbuf: true, Partition: "gpu", Name: "bash", WorkDir: "/work"}},
		{name: "kill-on-bad-exit=0 turns it off", args: []string{"--kill-on-bad-exit=0", "true"},
			want: got{Argv: []string{"true"}, Name: "true", WorkDir: "/work"}},
		{name: "jobid, output pattern, name and chdir", args: []string{"--jobid", "77", "-o", "out-%t.txt", "-J", "step", "-D", "/tmp", "env"},
			want: got{Argv: []string{"env"}, JobID: 77, Out: "out-%t.txt", Name: "step", WorkDir: "/tmp"}},
		{name: "prefix of a long option", args: []string{"--lab", "date"},
			want: got{Argv: []string{"date"}, Label: true, Name: "date", WorkDir: "/work"}},
		{name: "double dash ends the options", args: []string{"-l", "--", "-weird"},
			want: got{Argv: []string{"-weird"}, Label: true, Name: "-weird", WorkDir: "/work"}},
		{name: "no command", args: []string{"-N", "2"}, want: got{Nodes: 2, Name: "sbatch", WorkDir: "/work"}},
		{name: "unknown option", args: []string{"--bogus", "x"}, wantErr: "unrecognized option '--bogus'"},
		{name: "bad job id", args: []string{"--jobid=abc", "x"}, wantErr: "Invalid job id"},
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
			s := a.Spec
			g := got{Argv: a.Argv, Nodes: s.Nodes, Tasks: s.Tasks, PerNode: s.TasksPerNode, CPUs: s.CPUsPerTask,
				GPUsT: s.GPUsPerTask, Label: a.Label, Kill: a.KillBadEx, Pty: a.Pty, Unbuf: a.Unbuffered, JobID: a.JobID,
				Name: s.Name, Out: s.Stdout, Partition: s.Partition, WorkDir: s.WorkDir}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
			if s.Script != "" || len(s.Environment) != 2 {
				t.Fatalf("script %q environment %v", s.Script, s.Environment)
			}
		})
	}
}

// chunk is one piece of task output as it arrives.
type chunk struct {
	task   int
	stderr bool
	data   string
	exit   bool
}

func TestSinkLabels(t *testing.T) {
	tests := []struct {
		name             string
		ntasks           int
		label, unbuf     bool
		chunks           []chunk
		wantOut, wantErr string
	}{
		{name: "lines are labelled and never cut", ntasks: 2, label: true,
			chunks:  []chunk{{task: 0, data: "hel"}, {task: 1, data: "wor"}, {task: 0, data: "lo\nsec"}, {task: 1, data: "ld\n"}, {task: 0, data: "ond\n"}},
			wantOut: "0: hello\n1: world\n0: second\n"},
		{name: "labels pad to the widest task id", ntasks: 12, label: true,
			chunks:  []chunk{{task: 3, data: "a\nb\n"}, {task: 11, data: "c\n"}},
			wantOut: " 3: a\n 3: b\n11: c\n"},
		{name: "a last line without newline is flushed at exit", ntasks: 1, label: true,
			chunks:  []chunk{{task: 0, data: "no newline"}, {task: 0, exit: true}},
			wantOut: "0: no newline\n"},
		{name: "stderr is labelled apart", ntasks: 2, label: true,
			chunks:  []chunk{{task: 1, stderr: true, data: "oops\n"}, {task: 0, data: "fine\n"}},
			wantOut: "0: fine\n", wantErr: "1: oops\n"},
		{name: "unlabelled output is still whole lines", ntasks: 2,
			chunks:  []chunk{{task: 0, data: "ab"}, {task: 1, data: "xy\n"}, {task: 0, data: "c\n"}},
			wantOut: "xy\nabc\n"},
		{name: "unbuffered passes chunks as they come", ntasks: 2, unbuf: true,
			chunks:  []chunk{{task: 0, data: "ab"}, {task: 1, data: "xy\n"}, {task: 0, data: "c\n"}},
			wantOut: "abxy\nc\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			s := newSink(tt.ntasks, tt.label, tt.unbuf)
			s.routeOutput("", "", "/", func(int) patternVars { return patternVars{} }, &out, &errb)
			for _, c := range tt.chunks {
				if c.exit {
					s.flush(c.task)
					continue
				}
				s.write(c.task, c.stderr, []byte(c.data))
			}
			if out.String() != tt.wantOut || errb.String() != tt.wantErr {
				t.Fatalf("stdout %q stderr %q, want %q %q", out.String(), errb.String(), tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestRouteOutput(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	s := newSink(3, false, false)
	vars := func(task int) patternVars {
		return patternVars{jobID: 12, stepID: 1, task: task, node: task / 2, nodeName: []string{"gpu01", "gpu02"}[task/2]}
	}
	s.routeOutput("out-%j.%s-%t-%N.txt", "", dir, vars, &out, io.Discard)
	s.write(0, false, []byte("zero\n"))
	s.write(2, true, []byte("two-err\n"))
	s.close()
	for name, want := range map[string]string{"out-12.1-0-gpu01.txt": "zero\n", "out-12.1-2-gpu02.txt": "two-err\n"} {
		b, err := readFile(dir, name)
		if err != nil || b != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if out.Len() != 0 {
		t.Errorf("terminal got %q", out.String())
	}
	only := newSink(3, false, false)
	only.routeOutput("1", "none", dir, vars, &out, io.Discard)
	only.write(0, false, []byte("hidden\n"))
	only.write(1, false, []byte("shown\n"))
	if out.String() != "shown\n" {
		t.Errorf("-o 1 printed %q", out.String())
	}
}

func TestExpandPattern(t *testing.T) {
	v := patternVars{jobID: 7, stepID: 2, task: 3, node: 1, nodeName: "gpu02", user: "alice", name: "train"}
	tests := []struct{ name, in, want string }{
		{name: "every letter", in: "%j.%s.%t.%n.%N.%u.%x.%J", want: "7.2.3.1.gpu02.alice.train.7.2"},
		{name: "padding", in: "t%3t", want: "t003"},
		{name: "percent and unknown", in: "%%-%q", want: "%-%q"},
		{name: "trailing percent", in: "a%", want: "a%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expandPattern(tt.in, v); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStdinRoute(t *testing.T) {
	tests := []struct {
		in, mode, file string
		task           int
	}{
		{"", stepio.StdinAll, "", 0}, {"all", stepio.StdinAll, "", 0}, {"none", stepio.StdinNone, "", 0},
		{"3", stepio.StdinTask, "", 3}, {"in.txt", stepio.StdinAll, "in.txt", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			mode, task, file := stdinRoute(tt.in)
			if mode != tt.mode || task != tt.task || file != tt.file {
				t.Fatalf("got %s %d %q", mode, task, file)
			}
		})
	}
}
