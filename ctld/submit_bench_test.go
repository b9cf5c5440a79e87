package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
)

// submitBenchNodes is the cluster size of BenchmarkSubmitAPI, the
// issue 26 target's (make bench-scale): 2,000 nodes × 8 GPUs.
const submitBenchNodes = 2000

// fullCluster is a controller of n registered nodes (emuNNNN, 64 CPUs,
// 512 GB, 8 GPUs each) serving its real listeners (Server.Run: the unix
// socket, node_addr, the scheduling loop) with SQLite in a temporary
// directory, every node running one 8-GPU job, as scripts/bench-scale.sh
// leaves it before it measures submissions: what is submitted then
// waits. It returns the server and its socket; both go at the end of tb.
func fullCluster(tb testing.TB, n int) (*Server, string) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "tide-submit-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "ctld.sock")
	s := benchServerOf(tb, fmt.Sprintf(`
version: 1
cluster_name: t
state_dir: %s
socket: %s
node_addr: 127.0.0.1:0
allow_root_jobs: true
timeouts: {node: 1h, kill_wait: 5s, min_job_age: 5m}
scheduler: {interval: 1s}
partitions:
  - {name: emu, nodes: "emu[0001-%04d]", default: true}
nodes:
  - {names: "emu[0001-%04d]", cpus: 64, memory: 512G, gpus: 8}
`, dir, sock, n, n))
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("emu%04d", i)
		gpus, _ := gres.Fake(name, gres.FakeConfig{Count: 8, Model: "NVIDIA H100 80GB HBM3", MemoryMB: 81920})
		if _, err := s.register(api.NodeRegistration{Name: name, CPUs: 64, MemoryMB: 512 << 10, GPUs: gpus}); err != nil {
			tb.Fatal(err)
		}
	}
	root := caller{uid: 0, gid: 0, user: "root", known: true, admin: true}
	for range n {
		spec := api.JobSpec{Name: "fill", Script: "#!/bin/sh\ntrue\n", WorkDir: dir, GPUs: 8}
		if _, err := s.submit(context.Background(), root, api.SubmitRequest{Spec: spec}); err != nil {
			tb.Fatal(err)
		}
	}
	s.schedulePass()
	if running := runningJobs(s); running != n {
		tb.Fatalf("%d jobs running after the fill, want %d", running, n)
	}
	runUntilCleanup(tb, s, sock)
	return s, sock
}

// runningJobs counts s's running jobs.
func runningJobs(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, j := range s.jobs {
		if j.State == api.StateRunning {
			n++
		}
	}
	return n
}

// BenchmarkSubmitAPI is make bench-scale's sustained submissions in one
// process: b.N one-GPU jobs from 16 and from 64 concurrent API clients
// (and from one, the latency of a lone client's submission)
// (each its own kept-alive connection to the unix socket) to a
// controller of 2,000 nodes whose every GPU is taken, so that the jobs
// pile up pending while scheduling passes run as submissions kick them.
// It reports jobs/s, jobs per commit and the passes that ran; run it
// with a fixed count, as the backlog (and so each pass's cost) grows
// with b.N:
//
//	go test -tags libsqlite3 -run '^$' -bench SubmitAPI -benchtime 5000x ./ctld/
//
// The clients are net/http's, on Go's network poller: the CLI's client
// (ctld/client) blocks its thread in read(2) by design (a process that
// sends one request), and in the controller's own process sixty-four
// of those held the scheduler's processors from the server. Every
// submission carries a token, as ctld/client sends it. Every
// acknowledged job must be in the store when it is answered; the
// benchmark checks that they all are at the end.
func BenchmarkSubmitAPI(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, sock := fullCluster(b, submitBenchNodes)
			spec := api.JobSpec{Name: "scale", Script: "#!/bin/sh\n# tide-emulate:60s\ntrue\n", WorkDir: "/tmp",
				Environment: []string{"TIDE_EMULATE=60s"}, GPUs: 1}
			tr := &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				},
				MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients,
			}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			post := func() (uint64, error) {
				body, err := json.Marshal(api.SubmitRequest{Spec: spec, Token: client.NewToken()})
				if err != nil {
					return 0, err
				}
				resp, err := hc.Post("http://tidectld/api/v1/jobs", "application/json", bytes.NewReader(body))
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				var r api.SubmitResponse
				if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
					return 0, fmt.Errorf("submit: %s (%v)", resp.Status, err)
				}
				return r.JobID, nil
			}
			var next atomic.Int64
			var mu sync.Mutex
			var ids []uint64
			commits0, passes0, cpu0 := storeCommits(s), schedPasses(s), processCPU(b)
			b.ResetTimer()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					var mine []uint64
					for next.Add(1) <= int64(b.N) {
						id, err := post()
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, id)
					}
					mu.Lock()
					ids = append(ids, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			// The CPU of the process (clients included) per job: less
			// noisy than the rate on a shared machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
			// Commits include the passes' own; both say where the time
			// went when the rate moves.
			b.ReportMetric(float64(b.N)/(storeCommits(s)-commits0), "jobs/commit")
			b.ReportMetric(schedPasses(s)-passes0, "passes")
			if len(ids) != b.N {
				b.Fatalf("%d of %d submissions answered", len(ids), b.N)
			}
			stored, err := s.store.QueryJobs(context.Background(), api.JobFilter{IDs: ids, All: true})
			if err != nil {
				b.Fatal(err)
			}
			if len(stored) != b.N {
				b.Fatalf("%d of %d acknowledged jobs stored", len(stored), b.N)
			}
			for _, j := range stored {
				if j.Name != "scale" {
					b.Fatalf("stored job %d is %q", j.ID, j.Name)
				}
			}
		})
	}
}

// storeCommits is tide_store_commits_total.
func storeCommits(s *Server) float64 {
	var m dto.Metric
	_ = s.metrics.commits.Write(&m)
	return m.GetCounter().GetValue()
}

// schedPasses is how many scheduling passes ran the pure core
// (tide_schedule_cycle_seconds' count).
func schedPasses(s *Server) float64 {
	var m dto.Metric
	_ = s.metrics.cycle.Write(&m)
	return float64(m.GetHistogram().GetSampleCount())
}

// processCPU is the user and system CPU time the process used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
