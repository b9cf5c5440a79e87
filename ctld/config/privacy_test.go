package config

import (
	"strings"
	"testing"
)

func TestPrivateData(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		// want is PrivateData.String(); wantError the parts of the error.
		want      string
		wantError []string
	}{
		{name: "default: everything visible", want: "none"},
		{name: "empty list", yaml: "private_data: []\n", want: "none"},
		{name: "one word", yaml: "private_data: [jobs]\n", want: "jobs"},
		{name: "Slurm's order whatever the file's", yaml: "private_data: [usage, nodes, jobs, events]\n", want: "events,jobs,nodes,usage"},
		{name: "case and repeats as slurm.conf", yaml: "private_data: [Jobs, JOBS, usage]\n", want: "jobs,usage"},
		{name: "a comma-separated string", yaml: "private_data: \"jobs,usage\"\n", want: "jobs,usage"},
		{name: "the environment over the file", yaml: "private_data: [jobs]\n",
			env: map[string]string{"TIDECTLD_PRIVATE_DATA": "nodes,events"}, want: "events,nodes"},
		{name: "unknown word", yaml: "private_data: [job]\n",
			wantError: []string{`private_data: "job" is not a word Tide knows (valid: events, jobs, nodes, usage)`}},
		{name: "Slurm words Tide does not implement", yaml: "private_data: [jobs, partitions, reservations]\n",
			wantError: []string{`"partitions" is not a word`, `"reservations" is not a word`}},
		{name: "an empty word", yaml: "private_data: \"jobs,\"\n", wantError: []string{`private_data: "" is not a word`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := Parse(strings.NewReader(limitsBase + tt.yaml))
			var cl *Cluster
			if err == nil {
				cl, err = cfg.Validate()
			}
			if len(tt.wantError) > 0 {
				if err == nil {
					t.Fatalf("no error; private_data = %s", cl.Private)
				}
				for _, w := range tt.wantError {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cl.Private.String(); got != tt.want {
				t.Errorf("private_data = %s, want %s", got, tt.want)
			}
			if cl.Private.Any() != (tt.want != "none") {
				t.Errorf("Any() = %v for %s", cl.Private.Any(), tt.want)
			}
		})
	}
}
