package sacct

import "testing"

// TestClusters: -M/--clusters with the controller's cluster, "all" or a
// list holding it reports its jobs; a list of other clusters reports
// none and is no error, as Slurm's sacct against slurmdbd.
func TestClusters(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no -M", args: nil, want: "90|COMPLETED\n"},
		{name: "the local cluster", args: []string{"-M", "tide"}, want: "90|COMPLETED\n"},
		{name: "all", args: []string{"--clusters", "all"}, want: "90|COMPLETED\n"},
		{name: "all, any case", args: []string{"--clusters=ALL"}, want: "90|COMPLETED\n"},
		{name: "the vestigial -1", args: []string{"-M-1"}, want: "90|COMPLETED\n"},
		{name: "a list with the local cluster", args: []string{"--cluster=other,tide"}, want: "90|COMPLETED\n"},
		{name: "another cluster", args: []string{"-M", "other"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--jobs", "90", "-X", "-P", "-n", "-o", "JobID,State"}, tt.args...)
			r := run(t, 1000, nil, args...)
			if r.code != 0 || r.out != tt.want || r.errOut != "" {
				t.Errorf("sacct %v: %q (exit %d, stderr %q), want %q", args, r.out, r.code, r.errOut, tt.want)
			}
		})
	}
}
