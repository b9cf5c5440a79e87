package integration

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// allowedCPUs returns the CPUs this process may run on, from
// /proc/self/status (what node-cpus.sh reads too).
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var cpus []int
		for _, part := range strings.Split(strings.TrimSpace(list), ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				t.Fatalf("Cpus_allowed_list %q: %v", list, err)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					t.Fatalf("Cpus_allowed_list %q: %v", list, err)
				}
			}
			for c := a; c <= b; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	t.Skip("no Cpus_allowed_list")
	return nil
}

// TestNodeCPUs checks scripts/node-cpus.sh, which decides the host CPUs
// of a local cluster's nodes: the upper half of the allowed CPUs, a list
// given in TIDE_NODE_CPUS, nothing for "all" or a single CPU, and a
// clear refusal of a list the host does not have.
func TestNodeCPUs(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	cpus := allowedCPUs(t)
	if err := exec.Command("taskset", "-c", strconv.Itoa(cpus[0]), "true").Run(); err != nil {
		t.Skipf("affinities cannot be set here: %v", err)
	}
	var upper []string
	if len(cpus) >= 2 {
		for _, c := range cpus[(len(cpus)+1)/2:] {
			upper = append(upper, strconv.Itoa(c))
		}
	}
	first := strconv.Itoa(cpus[0])
	tests := []struct {
		name    string
		env     string
		wrap    []string // runs the script under this command
		want    string
		wantErr string
	}{
		{name: "default: upper half", want: strings.Join(upper, ",")},
		{name: "all", env: "all", want: ""},
		{name: "explicit list", env: first, want: first},
		{name: "one CPU", wrap: []string{"taskset", "-c", first}, want: ""},
		{name: "not a CPU of this host", env: "100000", wantErr: "TIDE_NODE_CPUS=100000"},
		{name: "not a list", env: "gpu", wantErr: "TIDE_NODE_CPUS=gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, tt.wrap...), "bash", "../../scripts/node-cpus.sh")
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "TIDE_NODE_CPUS="+tt.env)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("exit 0 (printed %q), want a refusal", out)
				}
				if !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("stderr %q does not name %q", stderr.String(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Fatalf("printed %q, want %q", got, tt.want)
			}
		})
	}
}
