package integration

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// cgCluster starts a one-node cluster whose tided confines process jobs
// in cgroups (cgroups: required) under a parent of its own, or skips the
// test where this host's cgroups cannot do that (not root, no writable
// hierarchy with a memory controller).
func cgCluster(t *testing.T) (*cluster, *cgroup.Hierarchy, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("job cgroups need tided to run as root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	if !h.Has(cgroup.Memory) {
		t.Skipf("cgroup %s has no memory controller", h)
	}
	b := make([]byte, 4)
	rand.Read(b)
	parent := "tide-it-cg-" + hex.EncodeToString(b)
	if err := h.Prepare(parent); err != nil {
		t.Skipf("cgroups not usable here: %v", err)
	}
	t.Cleanup(func() { h.RemoveParent(parent) })
	c := newClusterWith(t, 1, fmt.Sprintf("cgroups: required\ncgroup_parent: %s\n", parent))
	// A host whose cgroups tided cannot use runs jobs outside them: the
	// probe job says so.
	id := c.submit("#!/bin/sh\ncat /proc/self/cgroup\n", "-o", "probe-%j.out")
	c.waitTerminal(id, 30*time.Second)
	if out, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("probe-%d.out", id))); !strings.Contains(string(out), "/"+parent+"/") {
		t.Fatalf("process job did not run in its job cgroup under %s (output %q)", parent, out)
	}
	return c, h, parent
}

// cgDirs lists rel in each hierarchy of h.
func cgDirs(h *cgroup.Hierarchy, rel string) []string {
	if h.Version == cgroup.V2 {
		return []string{filepath.Join(h.Root, rel)}
	}
	var out []string
	for _, ctrl := range h.Controllers {
		out = append(out, filepath.Join(h.Root, ctrl, rel))
	}
	return out
}

// TestProcessJobCgroups runs process jobs in job cgroups: the job runs
// in <parent>/job_<id>, scancel kills a process that left the job's
// session, the cgroup is gone after the job, and a job over its --mem
// ends OUT_OF_MEMORY.
func TestProcessJobCgroups(t *testing.T) {
	c, h, parent := cgCluster(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	wd := c.workDir()

	t.Run("job in its cgroup, escaped process killed at scancel", func(t *testing.T) {
		// A sleep whose argument no other process has marks the escaped
		// process.
		marker := strconv.Itoa(40000 + int(time.Now().UnixNano()%20000))
		id := c.submitAs(nobody, "#!/bin/sh\ncat /proc/self/cgroup\nsetsid sleep "+marker+" </dev/null >/dev/null 2>&1 &\necho ready\nexec sleep 600\n",
			"-o", "cg-%j.out")
		out := c.waitOutput(filepath.Join(wd, fmt.Sprintf("cg-%d.out", id)), "ready", 60*time.Second)
		rel := parent + "/" + cgroup.JobName(id)
		if !strings.Contains(out, ":/"+rel+"\n") {
			t.Fatalf("job is not in %s:\n%s", rel, out)
		}
		var escaped []int
		c.eventually(10*time.Second, "escaped sleep running", func() bool {
			escaped = procsWithArg(marker)
			return len(escaped) == 1
		})
		procs, err := h.Open(parent, cgroup.JobName(id)).Procs()
		if err != nil || !slices.Contains(procs, escaped[0]) {
			t.Fatalf("cgroup %s holds %v (%v), want the escaped sleep %d", rel, procs, err, escaped[0])
		}
		if r := c.cli("scancel", strconv.FormatUint(id, 10)); r.code != 0 {
			t.Fatalf("scancel: %s%s", r.out, r.err)
		}
		if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateCancelled {
			t.Fatalf("state %s, want CANCELLED", j.State)
		}
		c.eventually(10*time.Second, "escaped sleep killed", func() bool { return len(procsWithArg(marker)) == 0 })
		c.eventually(10*time.Second, "job cgroup removed", func() bool {
			for _, d := range cgDirs(h, rel) {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					return false
				}
			}
			return true
		})
	})

	t.Run("memory hog ends OUT_OF_MEMORY", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\nhead -c 200M /dev/zero | tail\necho survived\n", "--mem=20M", "-o", "oom-%j.out")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateOOM || j.Reason != api.ReasonOutOfMemory {
			out, _ := os.ReadFile(filepath.Join(wd, fmt.Sprintf("oom-%d.out", id)))
			t.Fatalf("state %s reason %s exit %s; output %q", j.State, j.Reason, j.Exit, out)
		}
		if got := c.sacctLine(id); !strings.HasPrefix(got, fmt.Sprintf("%d|OUT_OF_MEMORY|", id)) {
			t.Fatalf("sacct = %q, want OUT_OF_MEMORY", got)
		}
	})
}
