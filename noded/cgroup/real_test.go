package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests in this file use the host's real hierarchy: they need root
// and a writable cgroup file system, and skip otherwise. Each works in a
// parent of its own (tide-cgtest-PID-N) that it removes at the end.

// realHierarchy returns the host's hierarchy of version v with a fresh
// parent prepared in it, or skips the test. A v2 test runs on a hybrid
// host's unified tree, which has no controllers but has the core
// features (kill, freeze) and eBPF device control.
func realHierarchy(t *testing.T, v Version) (*Hierarchy, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h, err := Detect(DefaultRoot)
	if err == nil && h.Version != v && v == V2 {
		h, err = Detect(filepath.Join(DefaultRoot, "unified"))
	}
	if err != nil {
		t.Skipf("no cgroup hierarchy: %v", err)
	}
	if h.Version != v {
		t.Skipf("host has cgroup %v, test needs %v", h.Version, v)
	}
	parent := fmt.Sprintf("tide-cgtest-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	if err := h.Prepare(parent); err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("cgroups not writable here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.Version == V2 {
			_ = syscall.Rmdir(filepath.Join(h.Root, parent))
			return
		}
		for _, c := range h.Controllers {
			_ = syscall.Rmdir(filepath.Join(h.Root, c, parent))
		}
	})
	return h, parent
}

// gated is a shell script started outside the cgroup that waits for a
// line on stdin before it goes on, so the test can move it in first (as
// the supervisor moves a job before it execs).
type gated struct {
	cmd *exec.Cmd
	out bytes.Buffer
	in  io.WriteCloser
}

func startGated(t *testing.T, c *Cgroup, script string) *gated {
	t.Helper()
	g := &gated{cmd: exec.Command("/bin/sh", "-c", "read go; "+script)}
	g.cmd.Stdout, g.cmd.Stderr = &g.out, &g.out
	var err error
	if g.in, err = g.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
	})
	if err := c.AddProc(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(g.in, "go\n"); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRealLifecycle(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(v.String(), func(t *testing.T) {
			h, parent := realHierarchy(t, v)
			l := Limits{}
			if h.Has(Memory) {
				l.MemoryBytes = 64 << 20
			}
			if h.Has(CPU) {
				l.CPUs = 1
			}
			if h.Has(Pids) {
				l.Pids = 50
			}
			c, err := h.Create(parent, JobName(1), l)
			if err != nil {
				t.Fatal(err)
			}
			// One process leaves the job's session: the cgroup still
			// holds it.
			g := startGated(t, c, "setsid sleep 300 & exec sleep 300")
			pid := g.cmd.Process.Pid
			var pids []int
			for range 500 {
				if pids, err = c.Procs(); err != nil {
					t.Fatal(err)
				}
				if len(pids) == 2 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(pids) != 2 || !slices.Contains(pids, pid) {
				t.Fatalf("cgroup holds %v, want %d and its escaped child", pids, pid)
			}
			self, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(self), "/"+c.Rel+"\n") {
				t.Errorf("/proc/%d/cgroup does not name %s:\n%s", pid, c.Rel, self)
			}
			if l.MemoryBytes > 0 {
				f := "memory.max"
				if v == V1 {
					f = "memory.limit_in_bytes"
				}
				if got, _ := readTrim(filepath.Join(c.dir(Memory), f)); got != "67108864" {
					t.Errorf("%s = %q", f, got)
				}
			}
			if v == V2 || h.Has(Freezer) {
				if err := c.Freeze(10 * time.Second); err != nil {
					t.Fatal(err)
				}
				if err := c.Thaw(10 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.KillAll(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			err = g.cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("job ended with %v, want SIGKILL", err)
			}
			if pids, _ := c.Procs(); len(pids) != 0 {
				t.Errorf("cgroup still holds %v", pids)
			}
			if err := c.Remove(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			for _, d := range c.Dirs() {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there (%v)", d, err)
				}
			}
		})
	}
}

func TestRealOOM(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(v.String(), func(t *testing.T) {
			h, parent := realHierarchy(t, v)
			if !h.Has(Memory) {
				t.Skip("no memory controller")
			}
			c, err := h.Create(parent, JobName(2), Limits{MemoryBytes: 20 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Remove(10 * time.Second)
			// tail holds the newline-free stream in memory.
			g := startGated(t, c, "head -c 200M /dev/zero | tail; echo survived $?")
			_ = g.cmd.Wait()
			n, err := c.OOMKills()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Errorf("no OOM kill counted; output %q", g.out.String())
			}
		})
	}
}

func TestRealDevices(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(v.String(), func(t *testing.T) {
			h, parent := realHierarchy(t, v)
			if v == V1 && !h.Has(Devices) {
				t.Skip("no devices controller")
			}
			// /dev/zero (1:5) is hidden, as another job's GPU would be.
			fence := &DeviceFence{Policy: DenyListed, Devices: []Device{{Type: "c", Major: 1, Minor: 5}}}
			c, err := h.Create(parent, JobName(3), Limits{Devices: fence})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Remove(10 * time.Second)
			g := startGated(t, c, "head -c 3 /dev/urandom >/dev/null && echo urandom ok; head -c 3 /dev/zero >/dev/null || echo zero denied")
			if err := g.cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, g.out.String())
			}
			out := g.out.String()
			if !strings.Contains(out, "urandom ok") || !strings.Contains(out, "zero denied") || !strings.Contains(out, "Operation not permitted") {
				t.Errorf("output %q: want /dev/urandom readable and /dev/zero denied", out)
			}

			// An allow list: only the base devices.
			c2, err := h.Create(parent, JobName(4), Limits{Devices: &DeviceFence{Policy: AllowListed, Devices: BaseDevices()}})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Remove(10 * time.Second)
			g = startGated(t, c2, "head -c 3 /dev/zero >/dev/null && echo zero ok; head -c 3 /dev/mem >/dev/null || echo mem denied")
			if err := g.cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, g.out.String())
			}
			if out := g.out.String(); !strings.Contains(out, "zero ok") || !strings.Contains(out, "mem denied") {
				t.Errorf("output %q: want /dev/zero readable and /dev/mem denied", out)
			}
		})
	}
}

// BenchmarkCreateRemove measures what a job cgroup adds to a job's start
// and end on this host (root with a writable hierarchy, else skipped):
// creating it with a memory and CPU limit, and removing it.
func BenchmarkCreateRemove(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	h, err := Detect(DefaultRoot)
	if err != nil {
		b.Skip(err)
	}
	parent := fmt.Sprintf("tide-cgbench-%d", os.Getpid())
	if err := h.Prepare(parent); err != nil {
		b.Skip(err)
	}
	defer func() {
		for _, c := range append(slices.Clone(h.Controllers), "") {
			_ = syscall.Rmdir(filepath.Join(h.Root, c, parent))
		}
	}()
	l := Limits{CPUs: 2, MemoryBytes: 1 << 30}
	c, err := h.Create(parent, "probe", l)
	if c == nil {
		b.Fatal(err)
	}
	if err := c.Remove(time.Second); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, _ := h.Create(parent, "job", l)
		if c == nil {
			b.Fatal("create failed")
		}
		if err := c.Remove(time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
