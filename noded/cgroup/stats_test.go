package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStats reads CPU time and block I/O from fake v1 and v2 job
// cgroups as the kernel lays them out.
func TestStats(t *testing.T) {
	tests := []struct {
		name    string
		v2      bool
		ctrls   []string // v1 hierarchies
		limits  Limits
		files   map[string]string // relative to the job cgroup (v1: to the cpu hierarchy's)
		want    Stats
		wantErr bool
	}{
		{
			name: "v2 cpu and io", v2: true,
			files: map[string]string{
				"cpu.stat": "usage_usec 1500123\nuser_usec 1200100\nsystem_usec 300023\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
				"io.stat":  "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n259:0 rbytes=100 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
			},
			want: Stats{HasCPU: true, UserUsec: 1200100, SystemUsec: 300023, UsageUsec: 1500123, HasIO: true, ReadBytes: 4196, WriteBytes: 8192},
		},
		{
			name: "v2 without the io controller", v2: true,
			files: map[string]string{"cpu.stat": "usage_usec 10\nuser_usec 7\nsystem_usec 3\n"},
			want:  Stats{HasCPU: true, UserUsec: 7, SystemUsec: 3, UsageUsec: 10},
		},
		{
			name: "v2 empty io.stat (io on, nothing read)", v2: true,
			files: map[string]string{"cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n", "io.stat": ""},
			want:  Stats{HasCPU: true, HasIO: true},
		},
		{
			name: "v1 cpu,cpuacct co-mounted", ctrls: []string{CPU, Memory, Freezer}, limits: Limits{CPUs: 2},
			files: map[string]string{"cpuacct.stat": "user 150\nsystem 25\n", "cpuacct.usage": "1750000123\n"},
			want:  Stats{HasCPU: true, UserUsec: 1500000, SystemUsec: 250000, UsageUsec: 1750000},
		},
		{
			name: "v1 cpuacct.stat without cpuacct.usage", ctrls: []string{CPU, Memory, Freezer}, limits: Limits{CPUs: 1},
			files: map[string]string{"cpuacct.stat": "user 3\nsystem 1\n"},
			want:  Stats{HasCPU: true, UserUsec: 30000, SystemUsec: 10000, UsageUsec: 40000},
		},
		{
			name: "v1 cpu hierarchy without cpuacct", ctrls: []string{CPU, Memory, Freezer}, limits: Limits{CPUs: 1},
			want: Stats{},
		},
		{
			name: "v1 job without a cpu limit joins no cpu hierarchy", ctrls: []string{CPU, Memory, Freezer},
			want: Stats{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root string
			if tt.v2 {
				root = fakeV2(t, "cpu io memory pids", "tide")
			} else {
				root = fakeV1(t, tt.ctrls, "tide")
			}
			h := detectFake(t, root)
			c, err := h.Create("tide", "job_7", tt.limits)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "tide", "job_7")
			if !tt.v2 {
				dir = filepath.Join(root, CPU, "tide", "job_7")
			}
			for f, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := c.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatsGone: a cgroup removed before it was read is an error the
// caller can tell (fs.ErrNotExist), not zero usage.
func TestStatsGone(t *testing.T) {
	for _, v2 := range []bool{true, false} {
		var root string
		var l Limits
		if v2 {
			root = fakeV2(t, "cpu memory", "tide")
		} else {
			root = fakeV1(t, []string{CPU, Memory, Freezer}, "tide")
			l.CPUs = 1
		}
		h := detectFake(t, root)
		c, err := h.Create("tide", "job_8", l)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Remove(0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stats(); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("v2=%v: Stats of a removed cgroup: %v, want fs.ErrNotExist", v2, err)
		}
	}
}

// TestReadIOStatBadLines skips what it cannot read rather than failing
// the whole reading.
func TestReadIOStatBadLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "io.stat")
	if err := os.WriteFile(p, []byte("8:0 rbytes=x wbytes=5 junk\n\n8:16 rbytes=7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, ok, err := readIOStat(p)
	if err != nil || !ok || r != 7 || w != 5 {
		t.Errorf("readIOStat = %d, %d, %v, %v; want 7, 5, true, nil", r, w, ok, err)
	}
}
