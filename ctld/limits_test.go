package ctld

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// limitsConfig is testConfig with small configurable bounds.
const limitsConfig = testConfig + `submit: {max_script_size: 2000, max_env_size: 300, max_env_vars: 5}
`

// TestSubmitLimits sends the API what a hostile or careless client
// could: every value is refused with an error naming the field and the
// bound, and nothing is stored.
func TestSubmitLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name   string
		spec   api.JobSpec
		errHas string // "" = accepted
	}{
		{"name at the bound", api.JobSpec{Name: long(1024)}, ""},
		{"name over the bound", api.JobSpec{Name: long(7 << 20)}, "job name is 7340032 bytes, at most 1024"},
		{"comment over", api.JobSpec{Comment: long(1025)}, "comment is 1025 bytes"},
		{"account over", api.JobSpec{Account: long(2000)}, "account is 2000 bytes"},
		{"output path over PATH_MAX", api.JobSpec{Stdout: "/" + long(4096)}, "output is 4097 bytes, at most 4096"},
		{"work dir with NUL", api.JobSpec{WorkDir: "/home/a\x00b"}, "working directory contains a NUL byte"},
		{"constraint over", api.JobSpec{Constraint: long(1025)}, "constraint is 1025 bytes"},
		{"array expression over", api.JobSpec{Array: strings.Repeat("1,", 3000)}, "array is 6000 bytes"},
		{"dependency over", api.JobSpec{Dependency: "afterok:" + strings.Repeat("1:", 70000)}, "dependency is"},
		{"script over max_script_size", api.JobSpec{Script: "#!/bin/sh\n" + long(2000)}, "batch script is 2010 bytes, more than the 2000 allowed (max_script_size)"},
		{"too many variables", api.JobSpec{Environment: []string{"A=1", "B=2", "C=3", "D=4", "E=5", "F=6"}}, "6 variables and arguments, more than the 5 allowed"},
		{"arguments count with variables", api.JobSpec{Environment: []string{"A=1", "B=2", "C=3"}, ScriptArgs: []string{"a", "b", "c"}}, "6 variables and arguments"},
		{"environment too large", api.JobSpec{Environment: []string{"A=" + long(400)}}, "more than the 300 allowed (max_env_size)"},
		{"environment entry without =", api.JobSpec{Environment: []string{"JUNK"}}, `"JUNK" is not NAME=VALUE`},
		{"environment with NUL", api.JobSpec{Environment: []string{"A=b\x00c"}}, "contains a NUL byte"},
		{"negative time limit", api.JobSpec{TimeLimit: -5}, api.ErrTimeLimit},
		{"time limit past the maximum", api.JobSpec{TimeLimit: api.MaxTimeLimit + 1}, "more than the maximum"},
		{"negative time-min", api.JobSpec{TimeMin: -1}, "--time-min"},
		{"a billion nodes", api.JobSpec{Nodes: 1 << 30}, "--nodes=1073741824 is not between 0 and 16777216"},
		{"tasks overflow CPUs", api.JobSpec{Tasks: 1 << 24, CPUsPerTask: 1 << 15}, "more than 16777216 CPUs"},
		{"negative memory", api.JobSpec{MemPerNodeMB: -5}, "--mem=-5M"},
		{"memory per cpu past the bound", api.JobSpec{MemPerCPUMB: 1 << 40}, "--mem-per-cpu"},
		{"nice past Slurm's range", api.JobSpec{Nice: 1 << 40}, "--nice"},
		{"signal number out of range", api.JobSpec{Signal: &api.SignalSpec{Signal: 99}}, "--signal 99@0"},
		{"switch wait negative", api.JobSpec{Switches: 1, SwitchWait: -1}, "--switches wait"},
		{"relative container mount", api.JobSpec{ContainerImage: "busybox", ContainerMounts: []api.ContainerMount{{Source: "etc", Destination: "/host-etc"}}},
			"invalid container mount etc:/host-etc: source and destination must be absolute paths"},
		{"container mount over the root", api.JobSpec{ContainerImage: "busybox", ContainerMounts: []api.ContainerMount{{Source: "/tmp", Destination: "/"}}},
			"cannot mount over the container's root"},
		{"too many dependency items", api.JobSpec{Dependency: "afterok:" + strings.Repeat("1:", 1100) + "1"}, "1101 jobs named, at most 1024"},
	}
	h := newHarnessWith(t, limitsConfig)
	h.register("gpu01")
	h.register("gpu02")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if spec.Dependency != "" && strings.HasSuffix(tt.name, "items") {
				// Every id must exist for the count to be what fails.
				h.submit(api.JobSpec{Hold: true})
			}
			before := len(h.s.jobs)
			resp, err := h.submitAs(h.alice, spec)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if resp.JobID == 0 {
					t.Fatal("no job id")
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as job %d", resp.JobID)
			}
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.errHas) ||
				!strings.HasPrefix(err.Error(), "Batch job submission failed: ") {
				t.Fatalf("error %q (class invalid argument: %v), want one with %q", err, errors.Is(err, api.ErrInvalidArgument), tt.errHas)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes echoes the value", len(err.Error()))
			}
			if len(h.s.jobs) != before {
				t.Fatal("a refused submission left a job")
			}
		})
	}
}

// TestUnlimitedStaysInPartitionLimit: a job without a limit (-1 through
// the API) in a partition with a maximum pends with PartitionTimeLimit;
// it never runs unlimited.
func TestUnlimitedStaysInPartitionLimit(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{TimeLimit: api.Infinite})
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StatePending || j.Reason != api.ReasonPartitionTimeLimit {
		t.Fatalf("job %s %s, want PENDING PartitionTimeLimit", j.State, j.Reason)
	}
}

// TestUpdateLimits: scontrol update is held to the same bounds.
func TestUpdateLimits(t *testing.T) {
	h := newHarness(t)
	id := h.submit(api.JobSpec{Hold: true})
	str := func(s string) *string { return &s }
	i64 := func(n int64) *int64 { return &n }
	in := func(n int) *int { return &n }
	tests := []struct {
		name   string
		u      api.JobUpdate
		errHas string
	}{
		{"name over", api.JobUpdate{Name: str(strings.Repeat("n", 2000))}, "job name is 2000 bytes"},
		{"comment over", api.JobUpdate{Comment: str(strings.Repeat("c", 1025))}, "comment is 1025 bytes"},
		{"account over", api.JobUpdate{Account: str(strings.Repeat("a", 1025))}, "account is 1025 bytes"},
		{"negative time limit", api.JobUpdate{TimeLimit: i64(-7)}, api.ErrTimeLimit},
		{"zero time limit", api.JobUpdate{TimeLimit: i64(0)}, api.ErrTimeLimit},
		{"nice past the range", api.JobUpdate{Nice: in(1 << 40)}, "Invalid nice value"},
		{"dependency over", api.JobUpdate{Dependency: str("afterok:" + strings.Repeat("1:", 70000))}, "dependency is"},
		{"a good field with a bad one", api.JobUpdate{Name: str("renamed"), Comment: str("ok"), TimeLimit: i64(-7)}, api.ErrTimeLimit},
		{"a good field before a refused move", api.JobUpdate{Name: str("renamed"), Partition: str("nowhere")}, "Invalid partition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.u
			u.IDs, u.Action = []uint64{id}, "update"
			resp, err := h.s.updateJobs(h.alice, u)
			if err != nil {
				t.Fatal(err)
			}
			if msg := resp.Results[0].Error; !strings.Contains(msg, tt.errHas) {
				t.Fatalf("result %q, want one with %q", msg, tt.errHas)
			}
		})
	}
	if j := h.job(id); j.Name != "sbatch" || j.Comment != "" || j.TimeLimit != 600 || j.Nice != 0 {
		t.Fatalf("refused updates changed the job: name %q comment %q limit %d nice %d", j.Name, j.Comment, j.TimeLimit, j.Nice)
	}
}

// TestDependencyCycleRefused: an update may not make jobs wait for each
// other, directly, through a chain, or through an array.
func TestDependencyCycleRefused(t *testing.T) {
	h := newHarness(t)
	a := h.submit(api.JobSpec{Hold: true})
	b := h.submit(api.JobSpec{Hold: true, Dependency: "afterok:" + itoa(a)})
	c := h.submit(api.JobSpec{Hold: true, Dependency: "afterany:" + itoa(b)})
	arr := h.submit(api.JobSpec{Hold: true, Array: "0-3"})
	d := h.submit(api.JobSpec{Hold: true, Dependency: "afterok:" + itoa(arr)})
	update := func(id uint64, task *api.TaskRef, dep string) string {
		u := api.JobUpdate{Action: "update", Dependency: &dep}
		if task != nil {
			u.Tasks = []api.TaskRef{*task}
		} else {
			u.IDs = []uint64{id}
		}
		resp, err := h.s.updateJobs(h.alice, u)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results[0].Error
	}
	for _, tc := range []struct {
		name string
		id   uint64
		task *api.TaskRef
		dep  string
	}{
		{"direct", a, nil, "afterok:" + itoa(b)},
		{"through a chain", a, nil, "afterany:" + itoa(c)},
		{"among several items", a, nil, "afterok:" + itoa(arr) + ":" + itoa(c)},
		{"an array task waiting for its dependent", arr, &api.TaskRef{JobID: arr, Task: 2}, "afterok:" + itoa(d)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := update(tc.id, tc.task, tc.dep); !strings.Contains(msg, api.ErrCircularDependency) {
				t.Fatalf("result %q, want %q", msg, api.ErrCircularDependency)
			}
		})
	}
	if msg := update(c, nil, "afterok:"+itoa(arr)); msg != "" {
		t.Fatalf("a dependency without a cycle refused: %s", msg)
	}
	if j := h.job(a); j.Dependency != "" {
		t.Fatalf("refused update left dependency %q", j.Dependency)
	}
}

func itoa(id uint64) string { return strconv.FormatUint(id, 10) }
