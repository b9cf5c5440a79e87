package squeue

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// TestEnvDefaults checks that each SQUEUE_* variable prints what its
// option prints, and that the command line wins.
func TestEnvDefaults(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		sameAs   []string
		notEqual bool
	}{
		{name: "SQUEUE_QOS", env: map[string]string{"SQUEUE_QOS": "normal"}, sameAs: []string{"-q", "normal"}},
		{name: "SQUEUE_USERS", env: map[string]string{"SQUEUE_USERS": "alice"}, sameAs: []string{"-u", "alice"}},
		{name: "SQUEUE_PARTITION", env: map[string]string{"SQUEUE_PARTITION": "debug"}, sameAs: []string{"-p", "debug"}},
		{name: "SQUEUE_STATES", env: map[string]string{"SQUEUE_STATES": "PD"}, sameAs: []string{"-t", "PD"}},
		{name: "SQUEUE_SORT", env: map[string]string{"SQUEUE_SORT": "-i"}, sameAs: []string{"-S", "-i"}},
		{name: "SQUEUE_FORMAT", env: map[string]string{"SQUEUE_FORMAT": "%i %u"}, sameAs: []string{"-o", "%i %u"}},
		{name: "SQUEUE_FORMAT2", env: map[string]string{"SQUEUE_FORMAT2": "JobID:8,UserName:6"}, sameAs: []string{"-O", "JobID:8,UserName:6"}},
		{name: "-q beats SQUEUE_QOS", env: map[string]string{"SQUEUE_QOS": "nosuch"}, args: []string{"-q", "normal"}, sameAs: []string{"-q", "normal"}},
		{name: "--start beats SQUEUE_FORMAT", env: map[string]string{"SQUEUE_FORMAT": "%i"}, args: []string{"--start"}, sameAs: []string{"--start"}},
		{name: "the variables that change nothing on one cluster", env: map[string]string{"SQUEUE_ALL": "1", "SQUEUE_LOCAL": "1",
			"SQUEUE_SIBLING": "1", "SQUEUE_FEDERATION": "1"}, sameAs: []string{}},
		{name: "SQUEUE_QOS filters", env: map[string]string{"SQUEUE_QOS": "nosuch"}, sameAs: []string{}, notEqual: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errOut, err := exec(t, slurmfmttest.Cluster(), tt.env, tt.args...)
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, errOut)
			}
			want, _, err := exec(t, slurmfmttest.Cluster(), nil, tt.sameAs...)
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) == tt.notEqual {
				t.Errorf("with %v:\n%s\nwith squeue %v:\n%s", tt.env, got, strings.Join(tt.sameAs, " "), want)
			}
		})
	}
}

// TestEnvArray checks SQUEUE_ARRAY against -r on a cluster with an
// array, where -r changes the output.
func TestEnvArray(t *testing.T) {
	withEnv, _, err := exec(t, arrayCluster(), map[string]string{"SQUEUE_ARRAY": "1"})
	if err != nil {
		t.Fatal(err)
	}
	withFlag, _, _ := exec(t, arrayCluster(), nil, "-r")
	without, _, _ := exec(t, arrayCluster(), nil)
	if withEnv != withFlag || withEnv == without {
		t.Errorf("SQUEUE_ARRAY=1:\n%s\nsqueue -r:\n%s\nsqueue:\n%s", withEnv, withFlag, without)
	}
}

// TestEnvTimeFormat is SLURM_TIME_FORMAT's output: standard, relative and
// a strftime format.
func TestEnvTimeFormat(t *testing.T) {
	args := []string{"-t", "all", "-O", "JobID:5,SubmitTime:20,StartTime:20,EndTime:20"}
	for _, f := range []string{"standard", "relative", "%a %d %H:%M"} {
		name := "env-time-" + strings.NewReplacer("%", "", " ", "-", ":", "").Replace(f)
		t.Run(name, func(t *testing.T) {
			out, errOut, err := exec(t, slurmfmttest.Cluster(), map[string]string{"SLURM_TIME_FORMAT": f}, args...)
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, errOut)
			}
			golden(t, name, out)
		})
	}
	std, _, _ := exec(t, slurmfmttest.Cluster(), nil, args...)
	unset, _, _ := exec(t, slurmfmttest.Cluster(), map[string]string{"SLURM_TIME_FORMAT": "standard"}, args...)
	if std != unset {
		t.Errorf("SLURM_TIME_FORMAT=standard differs from unset")
	}
}

func TestEnvClusters(t *testing.T) {
	fake := slurmfmttest.Cluster()
	fake.Info.Name = "tide"
	if _, errOut, err := exec(t, fake, map[string]string{"SLURM_CLUSTERS": "tide"}); err != nil {
		t.Errorf("SLURM_CLUSTERS naming the cluster: %v (stderr %q)", err, errOut)
	}
	_, _, err := exec(t, fake, map[string]string{"SLURM_CLUSTERS": "other"})
	if err == nil || !strings.Contains(err.Error(), "'other' can't be reached now, or it is an invalid entry for SLURM_CLUSTERS.") {
		t.Errorf("SLURM_CLUSTERS=other: %v", err)
	}
}
