// Command benchscale holds the measuring steps of scripts/bench-scale.sh
// (make bench-scale, issue 26): each subcommand measures one thing
// against a running controller and prints one line, "key value", that
// the script collects into its table.
//
//	benchscale wait-idle  -socket S -n N -since NS    seconds until N nodes are idle
//	benchscale wait-api   -socket S -since NS         seconds until the job list answers
//	benchscale wait-running -socket S -n N            seconds until N jobs run
//	benchscale cpu        -pid P -for 30s             CPU share of one core, percent
//	benchscale submit     -socket S -n N -clients C [-pid P]
//	                      submissions per second (API clients); with -pid,
//	                      the controller's and the clients' CPU per job (µs)
//	benchscale passes     -metrics URL -for 30s       scheduling pass p50/p99 (ms)
//	benchscale time       -n K -- CMD ARGS...         median and worst wall time (s)
//	benchscale cli        -n N -clients C -- CMD ARGS...  CMD runs per second (CLI clients)
//
// Submissions go through the controller's unix socket as the API
// clients of a portal or workflow engine would: one kept-alive
// connection per client, no process start-up. The cli subcommand is
// the other kind of client, a command-line one (sbatch, Tide's or
// Slurm's): every submission a process of its own, from C concurrent
// workers, so that both systems are driven by the same harness.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: benchscale wait-idle|wait-running|wait-api|cpu|submit|cli|passes|time [flags]"))
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("benchscale "+cmd, flag.ExitOnError)
	socket := fs.String("socket", os.Getenv("TIDE_SOCKET"), "the controller's unix socket")
	n := fs.Int("n", 0, "nodes (wait-idle), jobs (submit, cli), runs (time)")
	since := fs.Int64("since", 0, "start of the measure, Unix nanoseconds (default: now)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	pid := fs.Int("pid", 0, "process to measure (cpu)")
	window := fs.Duration("for", 30*time.Second, "measuring window (cpu, passes)")
	clients := fs.Int("clients", 16, "concurrent clients (submit, cli)")
	gpus := fs.Int("gpus", 1, "GPUs per submitted job")
	emulate := fs.String("emulate", "60s", "the jobs' TIDE_EMULATE (how long they run on an emulated node)")
	partition := fs.String("partition", "", "partition of the submitted jobs (default: the default one)")
	workDir := fs.String("workdir", os.TempDir(), "the submitted jobs' work directory")
	metricsURL := fs.String("metrics", "", "the controller's /metrics URL (passes)")
	cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile to the file (submit)")
	if err := fs.Parse(args); err != nil {
		fail(err)
	}
	start := time.Now()
	if *since > 0 {
		start = time.Unix(0, *since)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var err error
	switch cmd {
	case "wait-idle":
		err = waitIdle(ctx, client.NewUnix(*socket), *n, start)
	case "wait-running":
		err = waitRunning(ctx, client.NewUnix(*socket), *n, start)
	case "wait-api":
		err = waitAPI(ctx, client.NewUnix(*socket), start)
	case "cpu":
		err = cpuShare(*pid, *window)
	case "submit":
		spec := api.JobSpec{Name: "scale", Script: "#!/bin/sh\n# tide-emulate:" + *emulate + "\ntrue\n", WorkDir: *workDir,
			Environment: []string{"TIDE_EMULATE=" + *emulate}, GPUs: *gpus, Partition: *partition}
		err = withProfile(*cpuProfile, func() error { return submit(ctx, *socket, spec, *n, *clients, *pid) })
	case "cli":
		err = printCLI(ctx, fs.Args(), *n, *clients)
	case "passes":
		err = passes(ctx, *metricsURL, *window)
	case "time":
		err = timeCommand(*n, fs.Args())
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchscale:", err)
	os.Exit(1)
}

// waitIdle polls the node list until n nodes are idle and prints the
// seconds since start.
func waitIdle(ctx context.Context, c *client.Client, n int, start time.Time) error {
	last := time.Now()
	for {
		nl, err := c.Nodes(ctx)
		idle := 0
		if err == nil {
			for _, nd := range nl.Nodes {
				if nd.State == api.NodeIdle {
					idle++
				}
			}
		}
		if idle >= n {
			fmt.Printf("idle_s %.2f\n", time.Since(start).Seconds())
			return nil
		}
		if time.Since(last) > 5*time.Second {
			fmt.Fprintf(os.Stderr, "benchscale: %d/%d nodes idle after %.0fs\n", idle, n, time.Since(start).Seconds())
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes idle when giving up (%v): %w", idle, n, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitRunning polls the job list until n jobs run and prints the
// seconds since start.
func waitRunning(ctx context.Context, c *client.Client, n int, start time.Time) error {
	for {
		jl, err := c.Jobs(ctx, api.JobFilter{States: []api.JobState{api.StateRunning}})
		if err == nil && len(jl.Jobs) >= n {
			fmt.Printf("running_s %.2f\n", time.Since(start).Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fewer than %d jobs running when giving up (%v): %w", n, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitAPI polls the job list until it answers and prints the seconds
// since start, and how many jobs it listed.
func waitAPI(ctx context.Context, c *client.Client, start time.Time) error {
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		jl, err := c.Jobs(qctx, api.JobFilter{})
		cancel()
		if err == nil {
			fmt.Printf("serving_s %.2f\njobs %d\n", time.Since(start).Seconds(), len(jl.Jobs))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the controller did not answer (%v): %w", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Tide runs on).
const clockTicks = 100

// cpuTicks reads a process's user and system time, in clock ticks.
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14 and stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return u + st, nil
}

// cpuShare prints the process's CPU time over the window as a percentage
// of one core.
func cpuShare(pid int, window time.Duration) error {
	if pid <= 0 {
		return errors.New("-pid is required")
	}
	t0, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	w0 := time.Now()
	time.Sleep(window)
	t1, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	secs := float64(t1-t0) / clockTicks
	fmt.Printf("cpu_pct %.1f\n", 100*secs/time.Since(w0).Seconds())
	return nil
}

// submit sends n submissions from the given number of concurrent
// clients (each its own connection) and prints the rate. With pid > 0
// (the controller's) it also prints the CPU time the controller and
// these clients spent per job: on a shared 2-core machine the rate
// moves with the neighbours' load, the CPU per job much less, and the
// two processes share the cores, so both say what bounds the rate.
func submit(ctx context.Context, socket string, spec api.JobSpec, n, clients, pid int) error {
	if n <= 0 || clients <= 0 {
		return errors.New("-n and -clients must be positive")
	}
	var ctld0 uint64
	if pid > 0 {
		t, err := cpuTicks(pid)
		if err != nil {
			return err
		}
		ctld0 = t
	}
	self0 := selfCPU()
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	begin := time.Now()
	for range clients {
		wg.Go(func() {
			c := client.NewUnix(socket)
			defer c.Close()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if _, err := c.Submit(ctx, api.SubmitRequest{Spec: spec}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(begin).Seconds()
	ok := int64(n) - failed.Load()
	fmt.Printf("submitted %d\nfailed %d\nseconds %.2f\njobs_per_s %.0f\n", ok, failed.Load(), el, float64(ok)/el)
	if pid > 0 && ok > 0 {
		t, err := cpuTicks(pid)
		if err != nil {
			return err
		}
		perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(ok) }
		fmt.Printf("ctld_cpu_us_per_job %.0f\nclient_cpu_us_per_job %.0f\n",
			perJob(time.Duration(t-ctld0)*time.Second/clockTicks), perJob(selfCPU()-self0))
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d submissions failed; first: %v", f, firstErr.Load())
	}
	return nil
}

// withProfile runs f, writing this process's CPU profile over it to
// file unless file is empty.
func withProfile(file string, f func() error) error {
	if file == "" {
		return f()
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return err
	}
	ferr := f()
	pprof.StopCPUProfile()
	return errors.Join(ferr, out.Close())
}

// selfCPU is this process's user and system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cliResult is what runCLI counted.
type cliResult struct {
	ok, failed int64
	seconds    float64
	firstErr   string // the first failure: the command's error and its stderr
}

// runCLI runs argv n times from the given number of concurrent workers,
// each run a process of its own (stdout discarded), and counts the runs
// that exited 0.
func runCLI(ctx context.Context, argv []string, n, clients int) (cliResult, error) {
	if n <= 0 || clients <= 0 {
		return cliResult{}, errors.New("-n and -clients must be positive")
	}
	if len(argv) == 0 {
		return cliResult{}, errors.New("no command: benchscale cli -n N -clients C -- CMD ARGS...")
	}
	var next, ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	begin := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String())))
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	r := cliResult{ok: ok.Load(), failed: failed.Load(), seconds: time.Since(begin).Seconds()}
	if e, _ := firstErr.Load().(string); e != "" {
		r.firstErr = e
	}
	return r, ctx.Err()
}

// printCLI runs runCLI and prints the counts and the rate of successful
// runs. Failed runs are reported, not fatal: a controller that refuses
// submissions (Slurm at MaxJobCount, say) shows as failures in the
// results rather than as a missing figure.
func printCLI(ctx context.Context, argv []string, n, clients int) error {
	r, err := runCLI(ctx, argv, n, clients)
	if r.seconds == 0 {
		return err
	}
	fmt.Printf("submitted %d\nfailed %d\nseconds %.2f\njobs_per_s %.0f\n", r.ok, r.failed, r.seconds, float64(r.ok)/r.seconds)
	if r.failed > 0 {
		fmt.Fprintf(os.Stderr, "benchscale: %d of %d runs of %s failed; first: %s\n", r.failed, n, argv[0], r.firstErr)
	}
	if err != nil {
		return fmt.Errorf("%d of %d runs done: %w", r.ok+r.failed, n, err)
	}
	return nil
}

// histogram is one reading of a Prometheus histogram: cumulative counts
// by upper bound.
type histogram struct {
	le    []float64
	count []float64
	sum   float64
	n     float64
}

// readHistogram reads the histogram name from a /metrics page.
func readHistogram(ctx context.Context, url, name string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return histogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var h histogram
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, name+`_bucket{le="`):
			rest := strings.TrimPrefix(line, name+`_bucket{le="`)
			le, val, ok := strings.Cut(rest, `"} `)
			if !ok {
				continue
			}
			b, err1 := strconv.ParseFloat(le, 64)
			v, err2 := strconv.ParseFloat(val, 64)
			if err1 == nil && err2 == nil {
				h.le, h.count = append(h.le, b), append(h.count, v)
			}
		case strings.HasPrefix(line, name+"_sum "):
			h.sum, _ = strconv.ParseFloat(strings.TrimPrefix(line, name+"_sum "), 64)
		case strings.HasPrefix(line, name+"_count "):
			h.n, _ = strconv.ParseFloat(strings.TrimPrefix(line, name+"_count "), 64)
		}
	}
	if len(h.le) == 0 {
		return h, fmt.Errorf("%s: no %s histogram", url, name)
	}
	return h, sc.Err()
}

// quantile estimates quantile q of the observations between two
// readings as Prometheus' histogram_quantile does: linear within the
// bucket that holds it.
func quantile(a, b histogram, q float64) float64 {
	total := b.n - a.n
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for i := range b.le {
		c := b.count[i] - a.count[i]
		if c >= rank {
			if math.IsInf(b.le[i], 1) {
				return prevLe
			}
			if c == prevCount {
				return b.le[i]
			}
			return prevLe + (b.le[i]-prevLe)*(rank-prevCount)/(c-prevCount)
		}
		prevLe, prevCount = b.le[i], c
	}
	return prevLe
}

// passes prints the scheduling passes' p50, p99 and mean over the
// window, from tide_schedule_cycle_seconds.
func passes(ctx context.Context, url string, window time.Duration) error {
	if url == "" {
		return errors.New("-metrics is required")
	}
	const name = "tide_schedule_cycle_seconds"
	a, err := readHistogram(ctx, url, name)
	if err != nil {
		return err
	}
	time.Sleep(window)
	b, err := readHistogram(ctx, url, name)
	if err != nil {
		return err
	}
	n := b.n - a.n
	if n <= 0 {
		return fmt.Errorf("no scheduling pass in %s", window)
	}
	fmt.Printf("passes %.0f\npass_p50_ms %.1f\npass_p99_ms %.1f\npass_mean_ms %.1f\n", n,
		1000*quantile(a, b, 0.5), 1000*quantile(a, b, 0.99), 1000*(b.sum-a.sum)/n)
	return nil
}

// timeCommand runs argv k times (output discarded) and prints the
// median and the worst wall time.
func timeCommand(k int, argv []string) error {
	if k <= 0 || len(argv) == 0 {
		return errors.New("usage: benchscale time -n K -- CMD ARGS...")
	}
	var ds []time.Duration
	for range k {
		cmd := exec.Command(argv[0], argv[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, stderr.String())
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	fmt.Printf("median_s %.3f\nmax_s %.3f\n", ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
	return nil
}
