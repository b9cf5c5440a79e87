package stepd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tide-hpc/tide/noded/cgroup"
)

// fakeJobCgroup lays out a v1 hierarchy (memory and freezer) under a
// temporary root with the cgroup tide/job_7 holding procs, and returns
// the root.
func fakeJobCgroup(t *testing.T, procs string) string {
	t.Helper()
	root := t.TempDir()
	for _, c := range []string{cgroup.Memory, cgroup.Freezer} {
		d := filepath.Join(root, c, "tide", "job_7")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{filepath.Join(root, c, "cgroup.procs"), filepath.Join(d, "cgroup.procs")} {
			if err := os.WriteFile(f, []byte(procs), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, cgroup.Freezer, "tide", "job_7", "freezer.state"), []byte("THAWED\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestJobCgroup(t *testing.T) {
	tests := []struct {
		name    string
		procs   string
		plan    func(root string) *CgroupPlan
		pid     int
		wantErr error
	}{
		{name: "job in its cgroup", procs: "41\n42\n", pid: 42,
			plan: func(root string) *CgroupPlan { return &CgroupPlan{Root: root, Parent: "tide", Name: "job_7"} }},
		{name: "no cgroup planned", procs: "42\n", pid: 42, wantErr: ErrNoJobCgroup,
			plan: func(string) *CgroupPlan { return nil }},
		{name: "cgroup gone", procs: "42\n", pid: 42, wantErr: ErrNoJobCgroup,
			plan: func(root string) *CgroupPlan { return &CgroupPlan{Root: root, Parent: "tide", Name: "job_8"} }},
		{name: "job outside its cgroup", procs: "41\n", pid: 42, wantErr: ErrNoJobCgroup,
			plan: func(root string) *CgroupPlan { return &CgroupPlan{Root: root, Parent: "tide", Name: "job_7"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeJobCgroup(t, tt.procs)
			dir := t.TempDir()
			if err := WriteJSONNew(filepath.Join(dir, FileExec), &Plan{JobID: 7, Cgroup: tt.plan(root)}, 0o600); err != nil {
				t.Fatal(err)
			}
			cg, err := JobCgroup(dir, tt.pid)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("JobCgroup = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cg.Rel != "tide/job_7" {
				t.Fatalf("cgroup %s", cg.Rel)
			}
			// The fake's freezer.state reads back what was written, as a
			// cgroup that froze at once.
			if err := cg.Freeze(time.Second); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(root, cgroup.Freezer, "tide", "job_7", "freezer.state"))
			if string(b) != "FROZEN" {
				t.Fatalf("freezer.state %q", b)
			}
		})
	}
	if _, err := JobCgroup(t.TempDir(), 1); err == nil || errors.Is(err, ErrNoJobCgroup) {
		t.Fatalf("missing plan: %v, want a read error", err)
	}
}

func TestFrozenMarker(t *testing.T) {
	dir := t.TempDir()
	if m := ReadMarkers(dir); m.Frozen != nil {
		t.Fatalf("frozen without a marker: %+v", m.Frozen)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := WriteFrozenMarker(dir, FrozenMarker{Time: at, How: FreezeCgroup}); err != nil {
		t.Fatal(err)
	}
	if m := ReadMarkers(dir); m.Frozen == nil || !m.Frozen.Time.Equal(at) || m.Frozen.How != FreezeCgroup {
		t.Fatalf("marker read back as %+v", m.Frozen)
	}
	// A damaged marker still says that the job is frozen.
	if err := os.WriteFile(filepath.Join(dir, MarkFrozen), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := ReadMarkers(dir); m.Frozen == nil || m.Frozen.How != "" {
		t.Fatalf("damaged marker read as %+v", m.Frozen)
	}
	for range 2 { // removing twice is fine
		if err := RemoveFrozenMarker(dir); err != nil {
			t.Fatal(err)
		}
	}
	if m := ReadMarkers(dir); m.Frozen != nil {
		t.Fatalf("frozen after removal: %+v", m.Frozen)
	}
}
