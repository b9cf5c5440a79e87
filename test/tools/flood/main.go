// Command flood reproduces issue 20's connection flood against a local
// cluster (scripts/up.sh): it opens n idle TCP connections to the
// controller's node address, opens again those the controller closes,
// and meanwhile times what users and nodes see: a job listing over the
// unix socket (squeue) and the nodes' states (sinfo).
//
//	go run ./test/tools/flood -addr 127.0.0.1:6817 -socket run/tidectld.sock -n 20000 -for 60s
//
// It prints one line per probe interval and a summary. The connections
// are held by child processes, as many as the file descriptor limit
// requires; -ctld-pid adds the controller's open descriptors to each
// line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6817", "the controller's node_addr")
	socket := flag.String("socket", os.Getenv("TIDE_SOCKET"), "the controller's unix socket, for the probes")
	n := flag.Int("n", 20000, "idle connections to hold")
	dur := flag.Duration("for", time.Minute, "how long to flood")
	redial := flag.Duration("redial", time.Second, "how often to open again the connections the controller closed (0: never)")
	every := flag.Duration("probe", time.Second, "probe interval")
	timeout := flag.Duration("probe-timeout", 10*time.Second, "a probe that takes longer counts as hung")
	workers := flag.Int("dialers", 64, "concurrent dials per flooding process")
	pid := flag.Int("ctld-pid", 0, "the controller's pid: report its open file descriptors (read from /proc)")
	child := flag.Bool("child", false, "internal: flood only, in a process of the parent's")
	flag.Parse()
	if *child {
		floodOnly(*addr, *n, *dur, *redial, *workers)
		return
	}
	if *socket == "" {
		*socket = client.DefaultSocket
	}
	// The flood runs in child processes, each within its own file
	// descriptor limit: one process could not hold as many connections
	// as the controller may, and the probes must not starve for
	// descriptors themselves.
	per := int(raiseNoFile(uint64(*n)+256)) - 256
	procs := max((*n+per-1)/max(per, 1), 1)
	var kids []*exec.Cmd
	for i := range procs {
		share := *n / procs
		if i < *n%procs {
			share++
		}
		cmd := exec.Command(os.Args[0], "-child", "-addr", *addr, "-n", strconv.Itoa(share), "-for", dur.String(),
			"-redial", redial.String(), "-dialers", strconv.Itoa(*workers))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "flood:", err)
			os.Exit(1)
		}
		kids = append(kids, cmd)
	}
	fmt.Printf("flood: %d idle connections to %s in %d processes for %s\n", *n, *addr, procs, *dur)

	var lat []time.Duration
	hung, failed, notUp, maxFDs := 0, 0, 0, 0
	tick := time.NewTicker(*every)
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < *dur {
		<-tick.C
		d, err := probeJobs(*socket, *timeout)
		nodes, up, nerr := probeNodes(*socket, *timeout)
		status := fmt.Sprintf("ok %v", d.Round(10*time.Microsecond))
		switch {
		case err != nil && d >= *timeout:
			hung++
			status = "HUNG"
		case err != nil:
			failed++
			status = "error: " + err.Error()
		default:
			lat = append(lat, d)
		}
		nodeStatus := fmt.Sprintf("%d/%d up", up, nodes)
		switch {
		case nerr != nil && errors.Is(nerr, context.DeadlineExceeded):
			nodeStatus = "HUNG"
		case nerr != nil:
			nodeStatus = "error: " + nerr.Error()
		}
		if nerr != nil || up < nodes {
			notUp++
		}
		fds := ""
		if *pid > 0 {
			n := openFDs(*pid)
			maxFDs = max(maxFDs, n)
			fds = fmt.Sprintf("ctld_fds=%-6d ", n)
		}
		fmt.Printf("t=%-5s %ssqueue: %-12s sinfo: %s\n", time.Since(start).Round(time.Second), fds, status, nodeStatus)
	}
	for _, k := range kids {
		_ = k.Wait()
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(int(float64(len(lat))*p), len(lat)-1)]
	}
	if *pid > 0 {
		fmt.Printf("summary: the controller had at most %d file descriptors open\n", maxFDs)
	}
	fmt.Printf("summary: squeue probes: %d ok (p50 %v, p90 %v, max %v), %d failed, %d hung (>%v); probes with a node not up: %d\n",
		len(lat), pct(0.5), pct(0.9), pct(1), failed, hung, *timeout, notUp)
}

// floodOnly holds n idle connections for dur and prints a summary.
func floodOnly(addr string, n int, dur, redial time.Duration, workers int) {
	raiseNoFile(uint64(n) + 64)
	f := &flooder{addr: addr, slots: make(chan struct{}, n)}
	for range n {
		f.slots <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	maxOpen := int64(0)
	go func() {
		for ctx.Err() == nil {
			maxOpen = max(maxOpen, f.open.Load())
			time.Sleep(100 * time.Millisecond)
		}
	}()
	f.run(ctx, workers, redial)
	<-ctx.Done()
	last, _ := f.lastErr.Load().(string)
	fmt.Printf("flood process %d: %d connections: held at most %d at once; opened %d, closed by the controller %d, dial errors %d %s\n",
		os.Getpid(), n, maxOpen, f.opened.Load(), f.closedBy.Load(), f.dialErrs.Load(), last)
}

// openFDs counts the descriptors process pid has open.
func openFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// flooder holds idle connections, one slot each.
type flooder struct {
	addr                             string
	slots                            chan struct{}
	open, opened, closedBy, dialErrs atomic.Int64
	lastErr                          atomic.Value
}

func (f *flooder) run(ctx context.Context, workers int, redial time.Duration) {
	var wg sync.WaitGroup
	for {
		free := len(f.slots)
		var next atomic.Int64
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(free) && ctx.Err() == nil {
					<-f.slots
					f.dial(ctx)
				}
			}()
		}
		wg.Wait()
		if redial <= 0 {
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(redial):
		}
	}
}

// dial opens one idle connection and watches it until the controller
// closes it (its slot is then free again) or the flood ends.
func (f *flooder) dial(ctx context.Context) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", f.addr)
	if err != nil {
		f.dialErrs.Add(1)
		f.lastErr.Store(err.Error())
		f.slots <- struct{}{}
		return
	}
	f.opened.Add(1)
	f.open.Add(1)
	go func() {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, err := c.Read(make([]byte, 1))
		if stop() && err != nil {
			f.closedBy.Add(1)
		}
		c.Close()
		f.open.Add(-1)
		f.slots <- struct{}{}
	}()
}

// probeJobs times a job listing over the socket, as squeue makes it.
func probeJobs(socket string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := client.NewUnix(socket)
	defer c.Close()
	t := time.Now()
	_, err := c.Jobs(ctx, api.JobFilter{})
	return time.Since(t), err
}

// probeNodes counts the nodes and those up (responding, not down).
func probeNodes(socket string, timeout time.Duration) (nodes, up int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := client.NewUnix(socket)
	defer c.Close()
	nl, err := c.Nodes(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, n := range nl.Nodes {
		if n.Responding && n.State != api.NodeDown {
			up++
		}
	}
	return len(nl.Nodes), up, nil
}

// raiseNoFile makes room for want descriptors where the limits allow
// (root may raise the hard limit too) and returns the soft limit.
func raiseNoFile(want uint64) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur >= want {
		return rl.Cur
	}
	try := rl
	try.Cur, try.Max = want, max(rl.Max, want)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &try) == nil {
		return want
	}
	rl.Cur = rl.Max
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		return rl.Cur
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur
}
