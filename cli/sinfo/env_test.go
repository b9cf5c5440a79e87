package sinfo

import (
	"context"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// execEnv runs sinfo with the environment env.
func execEnv(t *testing.T, fake *clitest.FakeAPI, env map[string]string, args ...string) (string, error) {
	t.Helper()
	f, bufs := clitest.Factory(fake, env)
	cmd := NewCmd(f)
	cmd.SetArgs(append([]string{}, args...))
	cmd.SetOut(bufs.Out)
	cmd.SetErr(bufs.Err)
	err := cmd.ExecuteContext(context.Background())
	return bufs.Out.String(), err
}

// TestEnv checks sinfo's variables against the options they stand for.
func TestEnv(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		sameAs []string
	}{
		{name: "SINFO_FORMAT", env: map[string]string{"SINFO_FORMAT": "%P %D"}, sameAs: []string{"-o", "%P %D"}},
		{name: "SINFO_PARTITION", env: map[string]string{"SINFO_PARTITION": "debug"}, sameAs: []string{"-p", "debug"}},
		{name: "SINFO_SORT", env: map[string]string{"SINFO_SORT": "-P"}, sameAs: []string{"-S", "-P"}},
		{name: "no effect on one cluster", env: map[string]string{"SINFO_ALL": "1", "SINFO_LOCAL": "1", "SINFO_FEDERATION": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := execEnv(t, slurmfmttest.Cluster(), tt.env)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := exec(t, slurmfmttest.Cluster(), tt.sameAs...)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("with %v:\n%s\nwith sinfo %v:\n%s", tt.env, got, tt.sameAs, want)
			}
		})
	}
}

// TestEnvTimeFormat checks SLURM_TIME_FORMAT on sinfo -R's time stamps.
func TestEnvTimeFormat(t *testing.T) {
	fake := slurmfmttest.Cluster()
	troubled(fake)
	std, err := execEnv(t, fake, nil, "-R")
	if err != nil {
		t.Fatal(err)
	}
	fake = slurmfmttest.Cluster()
	troubled(fake)
	got, err := execEnv(t, fake, map[string]string{"SLURM_TIME_FORMAT": "%d.%m. %H:%M"}, "-R")
	if err != nil {
		t.Fatal(err)
	}
	if got == std || !strings.Contains(std, "T") || strings.Count(got, ".") < 2 {
		t.Errorf("standard:\n%s\nSLURM_TIME_FORMAT=%%d.%%m. %%H:%%M:\n%s", std, got)
	}
	golden(t, "env-time-reasons", got)
}

func TestEnvClusters(t *testing.T) {
	fake := slurmfmttest.Cluster()
	fake.Info.Name = "tide"
	if _, err := execEnv(t, fake, map[string]string{"SLURM_CLUSTERS": "all"}); err != nil {
		t.Errorf("SLURM_CLUSTERS=all: %v", err)
	}
	if _, err := execEnv(t, fake, map[string]string{"SLURM_CLUSTERS": "elsewhere"}); err == nil ||
		!strings.Contains(err.Error(), "invalid entry for SLURM_CLUSTERS") {
		t.Errorf("SLURM_CLUSTERS=elsewhere: %v", err)
	}
}
