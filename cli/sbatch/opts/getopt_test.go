package opts

import "testing"

func TestGetoptSbatchTable(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // long name matched, or the error
	}{
		{name: "partition prefix", args: []string{"--part=gpu"}, want: "partition"},
		{name: "gpus exact beats gpus-per-node", args: []string{"--gpus=1"}, want: "gpus"},
		{name: "mem exact beats mem-per-cpu", args: []string{"--mem=1"}, want: "mem"},
		{name: "ambiguous in Slurm order", args: []string{"--ntasks-per=1"},
			want: "option '--ntasks-per=1' is ambiguous; possibilities: '--ntasks-per-core' '--ntasks-per-gpu' '--ntasks-per-node' '--ntasks-per-socket'"},
		{name: "cluster is its own name", args: []string{"--cluster=a"}, want: "cluster"},
		{name: "W is wait", args: []string{"-W"}, want: "wait"},
		{name: "wra prefix", args: []string{"--wra", "hostname"}, want: "wrap"},
	}
	g := newTableGetopt()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, _, err := parseArgs(g, tt.args)
			got := ""
			if err != nil {
				got = err.Error()
			} else if len(ms) == 1 {
				got = table()[ms[0].Index].Long
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
