package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// bufferConfig lets queue vision accept 5 jobs a second, 10 more
// waiting.
var bufferConfig = strings.Replace(shareConfig, "submit: {rate_per_queue: 1000}", "submit: {rate_per_queue: 5, buffer: 10}", 1)

// pendingInScheduler lists the ids the next pass would see.
func (h *harness) pendingInScheduler() []uint64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var out []uint64
	for _, j := range h.s.snapshot().Pending {
		out = append(out, j.ID)
	}
	return out
}

func TestSubmitBuffer(t *testing.T) {
	h := newHarnessWith(t, bufferConfig)
	// Jobs waiting for --begin are not throttled (nor do they use the
	// rate); eligible ones are.
	for range 15 {
		if j := h.job(h.submit(api.JobSpec{BeginTime: h.clock.now().Add(time.Hour)})); j.Reason != api.ReasonBeginTime {
			t.Fatalf("--begin job: %s", j.Reason)
		}
	}
	var ids []uint64
	for i := range 15 {
		resp, err := h.submitAs(h.alice, api.JobSpec{Name: "burst"})
		if err != nil {
			t.Fatalf("job %d refused: %v", i, err)
		}
		ids = append(ids, resp.JobID)
	}
	for i, id := range ids {
		j := h.job(id)
		if want := i >= 5; (j.Reason == api.ReasonBuffered) != want {
			t.Fatalf("job %d (#%d): reason %s, buffered want %v", id, i, j.Reason, want)
		}
	}
	// Beyond the buffer: 429 with the drain time.
	_, err := h.submitAs(h.alice, api.JobSpec{})
	var tm *tooManyRequests
	if !errors.Is(err, api.ErrTooManyRequests) || !errors.As(err, &tm) || tm.retryAfter != 3 {
		t.Fatalf("over the buffer: %v", err)
	}
	// Other queues are not affected.
	if _, err := h.submitAs(bob, api.JobSpec{}); err != nil {
		t.Fatal(err)
	}
	if got := h.s.queueList().Queues[0].Buffered; got != 10 {
		t.Fatalf("buffered %d", got)
	}

	// Released in arrival order at 5 a second, by the clock.
	h.releaseBuffered()
	if n := countBuffered(h, ids); n != 10 {
		t.Fatalf("released without time passing: %d still buffered", n)
	}
	h.clock.add(time.Second)
	h.releaseBuffered()
	for i, id := range ids {
		if want := i >= 10; (h.job(id).Reason == api.ReasonBuffered) != want {
			t.Fatalf("after 1s job #%d buffered=%v", i, !want)
		}
	}
	// A restart keeps the rest waiting, in order.
	h.restart()
	h.clock.add(time.Second)
	for _, id := range h.pendingInScheduler() {
		if h.job(id).Reason == api.ReasonBuffered {
			t.Fatalf("buffered job %d reached the scheduler", id)
		}
	}
	h.releaseBuffered()
	if n := countBuffered(h, ids); n != 0 {
		t.Fatalf("%d still buffered after 2s", n)
	}
}

// releaseBuffered runs the buffer's release as housekeeping does.
func (h *harness) releaseBuffered() {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.releaseBuffered(h.clock.now())
	h.s.flush()
}

func countBuffered(h *harness, ids []uint64) int {
	n := 0
	for _, id := range ids {
		if h.job(id).Reason == api.ReasonBuffered {
			n++
		}
	}
	return n
}

func TestSubmitBufferRetryAfterHeader(t *testing.T) {
	cfg := strings.Replace(shareConfig, "submit: {rate_per_queue: 1000}", "submit: {rate_per_queue: 0.5, buffer: 1}", 1)
	h := newHarnessWith(t, cfg)
	body, _ := json.Marshal(api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\n", WorkDir: "/tmp"}})
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/v1/jobs", bytes.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: 1000, Gid: 1000}))
		w := httptest.NewRecorder()
		h.s.users.names[1000] = cached{name: "alice", at: time.Now()}
		h.s.localHandler().ServeHTTP(w, r)
		return w
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		w := post()
		if w.Code != want {
			t.Fatalf("submission %d: %d %s", i, w.Code, w.Body)
		}
		if want == http.StatusTooManyRequests && w.Header().Get("Retry-After") != "4" {
			t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
}

// BenchmarkSubmitBurst times a burst of 1,000 submissions from 16
// clients into one queue whose rate (50/s) they exceed by far, while
// scheduling passes run: every job is accepted and stored (most wait in
// the buffer), and the passes report how long they took meanwhile
// (pass-max-ms: they must not queue behind the submissions' commits).
func BenchmarkSubmitBurst(b *testing.B) {
	s := benchServerOf(b, strings.Replace(shareConfig, "submit: {rate_per_queue: 1000}",
		"submit: {rate_per_queue: 50, buffer: 1000000}", 1))
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	const burst, clients = 1000, 16
	var worst time.Duration
	for b.Loop() {
		s.mu.Lock()
		before := len(s.jobs)
		s.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range burst / clients {
						spec := api.JobSpec{Script: "#!/bin/sh\n", WorkDir: "/w"}
						if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: spec}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}()
	passes:
		for {
			select {
			case <-done:
				break passes
			default:
			}
			t0 := time.Now()
			s.schedulePass()
			worst = max(worst, time.Since(t0))
		}
		s.mu.Lock()
		got := len(s.jobs) - before
		s.mu.Unlock()
		if got != burst/clients*clients {
			b.Fatalf("%d of %d submissions stored", got, burst/clients*clients)
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "pass-max-ms")
}
