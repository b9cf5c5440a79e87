package sinfo

import (
	"slices"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestMatchStates: -t compares base states and flags as Slurm's sinfo
// does: a drained idle node is idle, '&' wants every state.
func TestMatchStates(t *testing.T) {
	nodes := map[string]api.Node{
		"idle":       {Name: "idle", State: api.NodeIdle, Responding: true},
		"idle+drain": {Name: "idle+drain", State: api.NodeIdle, Drain: true, Responding: true},
		"down":       {Name: "down", State: api.NodeDown, Responding: true},
		"down+drain": {Name: "down+drain", State: api.NodeDown, Drain: true, Responding: true},
		"alloc":      {Name: "alloc", State: api.NodeAllocated, AllocCPUs: 4, Responding: true},
		"draining":   {Name: "draining", State: api.NodeMixed, AllocCPUs: 1, Drain: true, Responding: true},
	}
	tests := []struct {
		states string
		want   []string
	}{
		{states: "idle", want: []string{"idle", "idle+drain"}},
		{states: "down", want: []string{"down", "down+drain"}},
		{states: "down&drain", want: []string{"down+drain"}},
		{states: "idle&drain,alloc", want: []string{"alloc", "idle+drain"}},
		{states: "drain", want: []string{"down+drain", "draining", "idle+drain"}},
		{states: "drained", want: []string{"down+drain", "idle+drain"}},
		{states: "draining", want: []string{"draining"}},
		{states: "mix", want: []string{"draining"}},
	}
	for _, tt := range tests {
		t.Run(tt.states, func(t *testing.T) {
			groups, err := parseStates(tt.states)
			if err != nil {
				t.Fatal(err)
			}
			f := &filter{states: groups}
			var got []string
			for name, n := range nodes {
				if f.keep(&n) {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("-t %s: %v, want %v", tt.states, got, tt.want)
			}
		})
	}
}
