package cmdutil

import (
	"strings"
	"testing"
)

func TestCheckClusters(t *testing.T) {
	tests := []struct {
		name, list string
		fromEnv    bool
		want       string
	}{
		{name: "empty", list: ""},
		{name: "the local cluster", list: "tide"},
		{name: "all", list: "ALL"},
		{name: "a list naming only this one", list: "tide, all"},
		{name: "another cluster from the environment", list: "tide,other", fromEnv: true,
			want: "'other' can't be reached now, or it is an invalid entry for SLURM_CLUSTERS."},
		{name: "another cluster from the command line", list: "x", want: "invalid entry for --cluster."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckClusters(tt.list, "tide", tt.fromEnv)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
