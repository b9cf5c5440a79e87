package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// flood holds up to n idle TCP connections to addr, opening again every
// interval those the controller closed: what a careless or hostile
// client does to a controller's node address.
type flood struct {
	addr     string
	n        int
	dials    atomic.Int64 // connections opened
	closedBy atomic.Int64 // closed by the controller
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startFlood(t *testing.T, addr string, n int, interval time.Duration) *flood {
	f := &flood{addr: addr, n: n, stop: make(chan struct{})}
	slots := make(chan struct{}, n)
	for range n {
		slots <- struct{}{}
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			for free := len(slots); free > 0; free-- {
				<-slots
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					slots <- struct{}{}
					continue
				}
				f.dials.Add(1)
				f.wg.Add(1)
				go func() { // idle: wait until the controller closes it
					defer f.wg.Done()
					done := make(chan struct{})
					go func() {
						_, _ = c.Read(make([]byte, 1))
						close(done)
					}()
					select {
					case <-done:
						f.closedBy.Add(1)
					case <-f.stop:
					}
					c.Close()
					slots <- struct{}{}
				}()
			}
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(f.end)
	return f
}

func (f *flood) end() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

// openFDs counts the file descriptors process pid has open.
func openFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// metric reads one sample of the controller's /metrics over the socket.
func (c *cluster) metric(name string) float64 {
	c.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.socket)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://tidectld/metrics")
	if err != nil {
		c.t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestIdleConnectionFloodSparesUsersAndNodes floods a controller with
// idle TCP connections from the address its nodes use, with the
// default limits, and checks that users (over the socket, as another
// uid) and nodes (their held connections, and a node that reconnects
// during the flood) are served throughout, and that the controller
// holds only a bounded number of the flood's connections.
func TestIdleConnectionFloodSparesUsersAndNodes(t *testing.T) {
	c := newCluster(t, 2)
	const size = 1000
	f := startFlood(t, fmt.Sprintf("%s:%d", c.ctlHost, c.port), size, 250*time.Millisecond)
	c.eventually(30*time.Second, "the flood to open its connections", func() bool { return f.dials.Load() >= size })
	// The controller keeps at most the unauthenticated cap of them.
	if n := openFDs(c.ctld.Process.Pid); n >= size {
		t.Errorf("controller holds %d file descriptors during a flood of %d connections", n, size)
	}

	// squeue as another user answers.
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	for range 5 {
		r := c.cliAs(nobody, c.workDir(), "squeue")
		if r.code != 0 || !strings.Contains(r.out, "JOBID") {
			t.Fatalf("squeue as nobody during the flood: exit %d: %s%s", r.code, r.out, r.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Jobs run: nodes take launches and report ends over their
	// connections.
	id := c.submit("#!/bin/sh\necho flood-ok\n", "-w", "gpu01")
	if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
		t.Fatalf("job during the flood ended %s", j.State)
	}
	// A node that restarts during the flood connects again from the
	// flood's address and gets its work.
	kill(c.tided["gpu02"], syscall.SIGTERM)
	c.startTided("gpu02")
	id = c.submit("#!/bin/sh\necho flood-ok\n", "-w", "gpu02")
	if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
		t.Fatalf("job on the restarted node ended %s", j.State)
	}
	c.waitIdle()
	r := c.cliAs(nobody, c.workDir(), "sinfo", "-N", "-h", "-o", "%N %t")
	if r.code != 0 {
		t.Fatalf("sinfo: %s%s", r.out, r.err)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		if f := strings.Fields(line); len(f) != 2 || f[1] != "idle" {
			t.Errorf("sinfo during the flood: %q, want every node idle", line)
		}
	}
	evicted := c.metric(`tide_connections_evicted_total{listener="node"}`)
	if evicted == 0 || f.closedBy.Load() == 0 {
		t.Errorf("no flood connection was closed (evicted %v, seen closed %d)", evicted, f.closedBy.Load())
	}
	t.Logf("flood: %d connections opened, %d closed by the controller; controller fds now %d", f.dials.Load(), f.closedBy.Load(), openFDs(c.ctld.Process.Pid))
}
