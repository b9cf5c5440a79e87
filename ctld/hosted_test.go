package ctld

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
)

// newStepKeyHarness is a harness whose controller has a state directory
// of its own, where its step key lives.
func newStepKeyHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, strings.Replace(testConfig, "state_dir: /unused", "state_dir: "+t.TempDir(), 1))
}

// stepKey is the public half of the key file in the controller's state
// directory.
func (h *harness) stepKey() ed25519.PublicKey {
	h.t.Helper()
	k, err := stepcred.LoadKey(filepath.Join(h.s.cl.StateDir, StepKeyFile))
	if err != nil {
		h.t.Fatal(err)
	}
	return k.Public().(ed25519.PublicKey)
}

// syncGen syncs node with the hosted list gen it holds.
func (h *harness) syncGen(node string, gen uint64) api.NodeSyncResponse {
	h.t.Helper()
	resp, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: node, HostedGen: gen})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func TestHostedLists(t *testing.T) {
	h := newStepKeyHarness(t)
	reg := h.register("gpu01")
	if err := h.s.CheckStepKey(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(h.s.cl.StateDir, StepKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("step key file: %v, %v", fi, err)
	}
	if reg.StepKey != stepcred.EncodePublic(h.stepKey()) || reg.HostedGen == 0 || reg.Hosted != nil {
		t.Fatalf("registration answer: key %q hosted %+v gen %d", reg.StepKey, reg.Hosted, reg.HostedGen)
	}
	empty := reg.HostedGen
	gen2 := h.register("gpu02").HostedGen

	resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: api.JobSpec{Name: "alloc", Nodes: 2, Allocation: true, WorkDir: "/home/alice"}})
	if err != nil {
		t.Fatal(err)
	}
	alloc := resp.JobID
	h.s.schedulePass()
	wide := h.submit(api.JobSpec{Name: "wide", Nodes: 2})
	single := h.submit(api.JobSpec{Name: "single"})
	h.s.schedulePass()
	for _, id := range []uint64{alloc, wide, single} {
		if j := h.job(id); j.State != api.StateRunning {
			t.Fatalf("job %d %s", id, j.State)
		}
	}
	if h.job(single).BatchHost() != "gpu01" || h.job(wide).BatchHost() != "gpu01" {
		t.Fatalf("test expects the batch jobs on gpu01 first: %v %v", h.job(single).Alloc, h.job(wide).Alloc)
	}
	hosted := func(ids ...uint64) []api.HostedJob {
		var l []api.HostedJob
		for _, id := range ids {
			l = append(l, api.HostedJob{JobRef: api.JobRef{JobID: id}, UserID: 1000, GroupID: 1000})
		}
		return l
	}

	// The allocation is hosted on both nodes; the wide batch job on
	// gpu02 only (gpu01 launches it); the single-node job nowhere.
	r1 := h.syncGen("gpu01", empty)
	if diff := cmp.Diff(hosted(alloc), r1.Hosted); diff != "" || r1.HostedGen == 0 {
		t.Fatalf("gpu01 list (gen %d) (-want +got):\n%s", r1.HostedGen, diff)
	}
	r2 := h.syncGen("gpu02", gen2)
	if diff := cmp.Diff(hosted(alloc, wide), r2.Hosted); diff != "" {
		t.Fatalf("gpu02 list (-want +got):\n%s", diff)
	}
	// Echoed: not sent again.
	if r := h.syncGen("gpu02", r2.HostedGen); r.HostedGen != 0 || r.Hosted != nil {
		t.Fatalf("list sent again after the echo: %+v gen %d", r.Hosted, r.HostedGen)
	}
	// Not echoed (the answer was lost): sent again, the same.
	if r := h.syncGen("gpu02", gen2); r.HostedGen != r2.HostedGen || !cmp.Equal(r.Hosted, r2.Hosted) {
		t.Fatalf("list not repeated: %+v gen %d", r.Hosted, r.HostedGen)
	}

	// The allocation ends: off both lists.
	if err := h.s.releaseAllocation(h.alice, alloc, api.ExitStatus{}); err != nil {
		t.Fatal(err)
	}
	if r := h.syncGen("gpu01", r1.HostedGen); r.Hosted != nil || r.HostedGen != empty {
		t.Fatalf("gpu01 after the release: %+v gen %d, want the empty list (gen %d)", r.Hosted, r.HostedGen, empty)
	}
	r2 = h.syncGen("gpu02", r2.HostedGen)
	if diff := cmp.Diff(hosted(wide), r2.Hosted); diff != "" {
		t.Fatalf("gpu02 after the release (-want +got):\n%s", diff)
	}

	// A restarted controller signs with the same key and rebuilds the
	// lists from the jobs it recovered.
	key := h.stepKey()
	h.restart()
	reg = h.register("gpu02", running(wide, 0))
	if reg.StepKey != stepcred.EncodePublic(key) {
		t.Fatalf("step key after a restart %q, want %q", reg.StepKey, stepcred.EncodePublic(key))
	}
	if diff := cmp.Diff(hosted(wide), reg.Hosted); diff != "" || reg.HostedGen != r2.HostedGen {
		t.Fatalf("gpu02 list after a restart (gen %d, want %d) (-want +got):\n%s", reg.HostedGen, r2.HostedGen, diff)
	}
}

func TestStepKeyFileChecked(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		mode    os.FileMode
		wantErr string
	}{
		{name: "readable by others", data: "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n", mode: 0o644, wantErr: "accessible to others"},
		{name: "not a key", data: "hello\n", mode: 0o600, wantErr: `not a PEM "PRIVATE KEY" block`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newStepKeyHarness(t)
			path := filepath.Join(h.s.cl.StateDir, StepKeyFile)
			if err := os.WriteFile(path, []byte(tt.data), tt.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tt.mode)
			if err := h.s.CheckStepKey(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckStepKey: %v, want an error containing %q", err, tt.wantErr)
			}
			// Without a key a node gets none, and no step is granted.
			if reg := h.register("gpu01"); reg.StepKey != "" {
				t.Fatalf("registration answer carries step key %q", reg.StepKey)
			}
			h.s.mu.Lock()
			h.s.nodes["gpu01"].StepAddr = "127.0.0.1:6818"
			h.s.mu.Unlock()
			id := h.submit(api.JobSpec{Name: "j"})
			h.s.schedulePass()
			_, err := h.s.createStep(context.Background(), h.alice, id, api.StepRequest{Argv: []string{"true"}, Cwd: "/"})
			if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("createStep: %v", err)
			}
		})
	}
}
