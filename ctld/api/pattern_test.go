package api

import (
	"strings"
	"testing"
)

func TestExpandPattern(t *testing.T) {
	v := PatternVars{JobID: 42, Name: "train", User: "alice", Node: "gpu01", ArrayTask: -1}
	tests := []struct{ in, want string }{
		{"out-%j.txt", "out-42.txt"},
		{"%x-%u-%N.log", "train-alice-gpu01.log"},
		{"%5j", "00042"},
		{"100%%", "100%"},
		{"%A", "42"},
		{"%q", "%q"},
		{"trail%", "trail%"},
		{"plain", "plain"},
	}
	for _, tt := range tests {
		if got := ExpandPattern(tt.in, v); got != tt.want {
			t.Errorf("ExpandPattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	arr := PatternVars{JobID: 50, ArrayJobID: 40, ArrayTask: 3}
	if got := ExpandPattern("slurm-%A_%a.out", arr); got != "slurm-40_3.out" {
		t.Errorf("array pattern = %q", got)
	}
}

func TestExpandPatternWidth(t *testing.T) {
	v := PatternVars{JobID: 123, ArrayJobID: 120, ArrayTask: 7}
	single := PatternVars{JobID: 123, ArrayTask: -1}
	tests := []struct {
		name, in, want string
		vars           *PatternVars
	}{
		{"small width pads", "%5j", "00123", nil},
		{"width below the digits", "%2j", "123", nil},
		{"zero width", "%0j", "123", nil},
		{"width at the cap", "%10j", "0000000123", nil},
		{"width above the cap", "%11j", "0000000123", nil},
		{"the issue's probe", "out%0999999999j", "out0000000123", nil},
		{"digits past any integer", "%" + strings.Repeat("9", 400) + "j", "0000000123", nil},
		{"leading zeros", "%000004j", "0123", nil},
		{"array task", "%99a", "0000000007", nil},
		{"array id", "%99A", "0000000120", nil},
		{"non-array task is NO_VAL", "%12a", "4294967294", &single},
		{"width on a name is ignored", "%99x", "", nil},
		{"digits with no letter", "x%" + strings.Repeat("9", 50), "x%" + strings.Repeat("9", 50), nil},
		{"unknown letter keeps its digits", "%999q", "%999q", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vv := v
			if tt.vars != nil {
				vv = *tt.vars
			}
			if got := ExpandPattern(tt.in, vv); got != tt.want {
				t.Errorf("ExpandPattern(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestExpandPatternBounded: what a hostile pattern costs grows with its
// own length (and the values'), never with the widths it names, and a
// result that amplifies the job name is cut past any path's length.
func TestExpandPatternBounded(t *testing.T) {
	long := strings.Repeat("%999999999999j", 10000)
	got := ExpandPattern(long, PatternVars{JobID: 1})
	if len(got) > maxExpandedPattern+MaxPatternWidth {
		t.Errorf("expanded %d bytes of pattern to %d bytes, want at most %d", len(long), len(got), maxExpandedPattern+MaxPatternWidth)
	}
	if !strings.HasPrefix(got, "0000000001000000000100") {
		t.Errorf("expansion starts %q", got[:min(len(got), 40)])
	}
	name := strings.Repeat("n", 100000)
	got = ExpandPattern(strings.Repeat("%x", 100000), PatternVars{Name: name})
	if len(got) > maxExpandedPattern+len(name) || len(got) < maxExpandedPattern {
		t.Errorf("a name amplified by %%x expanded to %d bytes, want the cut at %d (+ one name)", len(got), maxExpandedPattern)
	}
	allocs := testing.AllocsPerRun(10, func() { ExpandPattern("out%0999999999j.%9999a", PatternVars{JobID: 5, ArrayTask: 3}) })
	if allocs > 2 {
		t.Errorf("ExpandPattern of a short pattern allocated %v times, want at most 2", allocs)
	}
}

// TestExpandPatternLaunch: the letters only a launch expands, with
// Slurm's meaning for the batch script (slurmstepd's batch file names):
// %J is the job id alone, %s "batch", %n and %t 0.
func TestExpandPatternLaunch(t *testing.T) {
	batch := PatternVars{JobID: 42, Name: "train", User: "alice", Node: "gpu01", ArrayTask: -1, Step: &StepVars{Batch: true}}
	step := PatternVars{JobID: 42, Node: "gpu02", ArrayTask: -1, Step: &StepVars{ID: 3, NodeIndex: 1, Task: 5}}
	array := PatternVars{JobID: 57, ArrayJobID: 50, ArrayTask: 7, Step: &StepVars{Batch: true}}
	tests := []struct {
		name, in, want string
		v              PatternVars
	}{
		{"%J of the batch script", "slurm-%J.out", "slurm-42.out", batch},
		{"%J of a step", "out-%J", "out-42.3", step},
		{"%J pads the job id only", "%6J", "000042.3", step},
		{"%s of the batch script", "%s", "batch", batch},
		{"%s of a step, padded", "%3s", "003", step},
		{"%n and %t of the batch script", "%n-%t", "0-0", batch},
		{"%n and %t of a task", "%2n-%4t", "01-0005", step},
		{"%N is the node", "%N.log", "gpu01.log", batch},
		{"all letters", "%A_%a-%j-%J-%x-%u-%N-%n-%t-%s-%%", "50_7-57-57----0-0-batch-%", array},
		{"unknown letters stay", "%q%Z", "%q%Z", batch},
		{"width above the cap", "%20t", "0000000000", batch},
		{"a backslash turns expansion off", `out\%j`, "out%j", batch},
		{"a doubled backslash keeps one", `a\\b%j`, `a\b%j`, batch},
		{"a task number: that task's file", "0", "0", batch},
		{"another task's number: /dev/null", "1", "/dev/null", batch},
		{"the step's task number", "5", "5", step},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpandPattern(tt.in, tt.v); got != tt.want {
				t.Errorf("ExpandPattern(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	// Listings (no Step) leave the launch letters and backslashes alone,
	// as Slurm's squeue and scontrol do.
	list := PatternVars{JobID: 42, ArrayTask: -1}
	for in, want := range map[string]string{"%J-%s-%n-%t": "%J-%s-%n-%t", `a\%j`: `a\42`, "1": "1"} {
		if got := ExpandPattern(in, list); got != want {
			t.Errorf("listing ExpandPattern(%q) = %q, want %q", in, got, want)
		}
	}
}
