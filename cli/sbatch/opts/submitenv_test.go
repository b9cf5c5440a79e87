package opts

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithSubmitterEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		s    Submitter
		want []string
	}{
		{name: "umask and nice", env: []string{"HOME=/h"}, s: Submitter{Umask: 0o027, Nice: 10},
			want: []string{"HOME=/h", "SLURM_UMASK=0027", "SLURM_PRIO_PROCESS=10"}},
		{name: "the caller's SLURM_UMASK stays", env: []string{"SLURM_UMASK=0077", "SLURM_PRIO_PROCESS=3"}, s: Submitter{Umask: 0o022},
			want: []string{"SLURM_UMASK=0077", "SLURM_PRIO_PROCESS=0"}},
		{name: "unknown umask", env: nil, s: Submitter{Umask: -1, Nice: -5}, want: []string{"SLURM_PRIO_PROCESS=-5"}},
		{name: "limits replace inherited ones, U marks --propagate's", env: []string{"SLURM_RLIMIT_CORE=99"},
			s:    Submitter{Umask: -1, Rlimits: []Rlimit{{Name: "CORE", Cur: 0}, {Name: "NOFILE", Cur: 1024, User: true}}},
			want: []string{"SLURM_RLIMIT_CORE=0", "SLURM_PRIO_PROCESS=0", "SLURM_RLIMIT_NOFILE=U1024"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, WithSubmitterEnv(tt.env, tt.s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetSubmitEnv checks what sbatch adds to the job's environment.
func TestSetSubmitEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		environ []string
		sub     *Submitter
		want    []string
	}{
		{name: "nothing to add", args: []string{"job.sh"}, environ: []string{"HOME=/h"}, want: []string{"HOME=/h"}},
		{name: "dependency as given", args: []string{"-d", "afterok:7:8", "job.sh"}, environ: []string{"HOME=/h"},
			want: []string{"HOME=/h", "SLURM_JOB_DEPENDENCY=afterok:7:8"}},
		{name: "export NONE", args: []string{"--export=NONE", "job.sh"}, environ: []string{"HOME=/h", "SLURM_CONF=/c"},
			want: []string{"SLURM_CONF=/c", "SLURM_EXPORT_ENV=NONE"}},
		{name: "export ALL is not passed on", args: []string{"--export=all", "job.sh"}, environ: []string{"HOME=/h"},
			want: []string{"HOME=/h"}},
		{name: "the caller's SLURM_EXPORT_ENV stays", args: []string{"--export=HOME", "job.sh"},
			environ: []string{"HOME=/h", "SLURM_EXPORT_ENV=ALL"}, want: []string{"HOME=/h", "SLURM_EXPORT_ENV=ALL"}},
		{name: "the submitter", args: []string{"job.sh"}, environ: []string{"HOME=/h"}, sub: &Submitter{Umask: 0o002, Nice: 1},
			want: []string{"HOME=/h", "SLURM_UMASK=0002", "SLURM_PRIO_PROCESS=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput(tt.args, nil, nil, nil)
			in.Environ = tt.environ
			r, err := Parse(in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.SetSubmitEnv(tt.sub).Spec.Environment); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCurrentSubmitter checks the umask read from /proc against the
// process's own.
func TestCurrentSubmitter(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	s := CurrentSubmitter()
	if s.Umask != 0o027 {
		t.Errorf("umask %04o, want 0027", s.Umask)
	}
	if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil && s.Nice != 20-p {
		t.Errorf("nice %d, want %d", s.Nice, 20-p)
	}
}

func TestPropagating(t *testing.T) {
	all := Submitter{Rlimits: []Rlimit{{Name: "CORE", Cur: 1}, {Name: "NOFILE", Cur: 2}, {Name: "STACK", Cur: 3}}}
	tests := []struct {
		name  string
		v     string
		given bool
		want  []Rlimit
	}{
		{name: "not given: all, unmarked", want: all.Rlimits},
		{name: "no value: all, marked", v: "set", given: true,
			want: []Rlimit{{Name: "CORE", Cur: 1, User: true}, {Name: "NOFILE", Cur: 2, User: true}, {Name: "STACK", Cur: 3, User: true}}},
		{name: "NONE", v: "NONE", given: true},
		{name: "a list", v: "core,RLIMIT_STACK", given: true,
			want: []Rlimit{{Name: "CORE", Cur: 1, User: true}, {Name: "STACK", Cur: 3, User: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, all.Propagating(tt.v, tt.given).Rlimits); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCurrentRlimitsNofile: the NOFILE limit srun hands on is the one
// it was started with, not the one Go's runtime raised it to.
func TestCurrentRlimitsNofile(t *testing.T) {
	if os.Getenv("TIDE_NOFILE_HELPER") == "1" {
		for _, r := range currentRlimits(true) {
			if r.Name == "NOFILE" {
				fmt.Printf("NOFILE=%d\n", r.Cur)
			}
		}
		return
	}
	cmd := exec.Command("/bin/sh", "-c", `ulimit -S -n 100 && exec "$0" -test.run='^TestCurrentRlimitsNofile$'`, os.Args[0])
	cmd.Env = append(os.Environ(), "TIDE_NOFILE_HELPER=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "NOFILE=100\n") {
		t.Fatalf("started with a soft NOFILE of 100, read:\n%s", out)
	}
	// sbatch's (not exact) leaves a raised NOFILE out.
	var raised bool
	for _, r := range currentRlimits(false) {
		raised = raised || r.Name == "NOFILE"
	}
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur == l.Max-1 && raised {
		t.Error("a NOFILE limit Go raised was handed on as the submitter's")
	}
}
