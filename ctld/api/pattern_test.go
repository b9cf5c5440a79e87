package api

import "testing"

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
