package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// answer429 is a throttled submission; retry "" leaves Retry-After out.
func answer429(retry string) string {
	body := `{"error":{"code":"too_many_requests","message":"Batch job submission failed: queue ml: submission buffer full (1000 jobs)"}}`
	h := ""
	if retry != "" {
		h = "Retry-After: " + retry + "\r\n"
	}
	return fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\n%sContent-Length: %d\r\n\r\n%s", h, len(body), body)
}

func answerJSON(status int, body string) string {
	if body == "" {
		return fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n", status)
	}
	return fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body)
}

func TestSubmitThrottled(t *testing.T) {
	ok := answerJSON(200, `{"job_id":42}`)
	tests := []struct {
		name    string
		answers []string
		budget  time.Duration
		// cancelAt cancels the context during that sleep (1-based).
		cancelAt int
		// tries is how many submissions reach the server.
		tries      int
		wantID     uint64
		wantSleeps []time.Duration
		wantTold   []Throttle
		wantErr    string
		wantClass  error
	}{
		{
			name:       "waits as told and tells once",
			answers:    []string{answer429("3"), answer429("2"), ok},
			tries:      3,
			wantID:     42,
			wantSleeps: []time.Duration{3 * time.Second, 2 * time.Second},
			wantTold:   []Throttle{{RetryIn: 3 * time.Second, Message: "queue ml: submission buffer full (1000 jobs)"}},
		},
		{
			name:       "no Retry-After waits a second",
			answers:    []string{answer429(""), answer429("soon"), ok},
			tries:      3,
			wantID:     42,
			wantSleeps: []time.Duration{time.Second, time.Second},
			wantTold:   []Throttle{{RetryIn: time.Second, Message: "queue ml: submission buffer full (1000 jobs)"}},
		},
		{
			name:       "gives up when the budget is spent",
			answers:    []string{answer429("3"), answer429("3"), ok},
			tries:      2,
			budget:     5 * time.Second,
			wantSleeps: []time.Duration{3 * time.Second},
			wantTold:   []Throttle{{RetryIn: 3 * time.Second, Message: "queue ml: submission buffer full (1000 jobs)"}},
			wantErr:    "submission throttled by the controller (queue buffer full); gave up after waiting 3s: queue ml: submission buffer full (1000 jobs)",
			wantClass:  api.ErrTooManyRequests,
		},
		{
			name:      "retrying off returns the first 429",
			answers:   []string{answer429("3"), ok},
			tries:     1,
			budget:    -1,
			wantErr:   "Batch job submission failed: queue ml: submission buffer full (1000 jobs)",
			wantClass: api.ErrTooManyRequests,
		},
		{
			name:       "an interrupt ends the wait",
			answers:    []string{answer429("30"), ok},
			tries:      1,
			cancelAt:   1,
			wantSleeps: []time.Duration{30 * time.Second},
			wantTold:   []Throttle{{RetryIn: 30 * time.Second, Message: "queue ml: submission buffer full (1000 jobs)"}},
			wantErr:    "context canceled",
			wantClass:  context.Canceled,
		},
		{
			name:       "a 429 without the class is still a throttle",
			answers:    []string{"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 4\r\n\r\nbusy", ok},
			tries:      2,
			wantID:     42,
			wantSleeps: []time.Duration{2 * time.Second},
			wantTold:   []Throttle{{RetryIn: 2 * time.Second, Message: "controller answered HTTP 429: busy"}},
		},
		{
			name:      "other errors are not retried",
			answers:   []string{answerJSON(400, `{"error":{"code":"invalid_argument","message":"bad qos"}}`), ok},
			tries:     1,
			wantErr:   "bad qos",
			wantClass: api.ErrInvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRawServer(t, tt.answers...)
			c := s.client()
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var sleeps []time.Duration
			c.sleep = func(ctx context.Context, d time.Duration) error {
				sleeps = append(sleeps, d)
				if len(sleeps) == tt.cancelAt {
					cancel()
					return ctx.Err()
				}
				return nil
			}
			var told []Throttle
			c.OnThrottle(func(th Throttle) { told = append(told, th) })
			c.SetMaxThrottleWait(tt.budget)
			r, err := c.Submit(ctx, api.SubmitRequest{Spec: api.JobSpec{Name: "x"}})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if !errors.Is(err, tt.wantClass) {
					t.Errorf("err = %v, want class %v", err, tt.wantClass)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if r.JobID != tt.wantID {
				t.Errorf("job id = %d, want %d", r.JobID, tt.wantID)
			}
			if diff := cmp.Diff(tt.wantSleeps, sleeps); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTold, told); diff != "" {
				t.Errorf("hook calls (-want +got):\n%s", diff)
			}
			// Every try is the same submission.
			for i := 0; i < tt.tries; i++ {
				if r := <-s.reqs; !strings.HasPrefix(r, "POST /api/v1/jobs {") {
					t.Errorf("request %d = %q", i, r)
				}
			}
			select {
			case r := <-s.reqs:
				t.Errorf("more than %d tries: %q", tt.tries, r)
			default:
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{name: "seconds", in: "7", want: 7 * time.Second},
		{name: "blank padded", in: " 2 ", want: 2 * time.Second},
		{name: "zero means a second", in: "0", want: time.Second},
		{name: "negative", in: "-4", want: time.Second},
		{name: "missing", in: "", want: time.Second},
		{name: "garbage", in: "later", want: time.Second},
		{name: "capped at a day", in: "999999", want: 24 * time.Hour},
		{name: "http date", in: "Mon, 30 Nov 2026 10:00:05 UTC", want: 5 * time.Second},
		{name: "http date in the past", in: "Mon, 30 Nov 2026 09:00:00 UTC", want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseRetryAfter(tt.in, now); got != tt.want {
				t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestQueuesAndCheckpoint(t *testing.T) {
	s := newRawServer(t,
		answerJSON(200, `{"queues":[{"name":"ml","guaranteed":16,"cap":32,"used_gpus":20,"borrowed_gpus":4}],"qos":[{"name":"training","default_level":5,"mode":"requeue"}],"default_qos":"batch","starvation_age":1800}`),
		answerJSON(204, ""),
		answerJSON(404, `{"error":{"code":"not_found","message":"Invalid job id specified"}}`),
	)
	c := s.client()
	defer c.Close()
	ql, err := c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := api.QueueList{
		Queues:        []api.QueueStatus{{Name: "ml", Guaranteed: 16, Cap: 32, UsedGPUs: 20, BorrowedGPUs: 4}},
		QOS:           []api.QOSStatus{{Name: "training", DefaultLevel: 5, Mode: api.PreemptRequeue}},
		DefaultQOS:    "batch",
		StarvationAge: 1800,
	}
	if diff := cmp.Diff(want, ql); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if err := c.Checkpoint(context.Background(), 77); err != nil {
		t.Fatal(err)
	}
	err = c.Checkpoint(context.Background(), 78)
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
	wantReqs := []string{"GET /api/v1/queues ", "POST /api/v1/jobs/77/checkpoint ", "POST /api/v1/jobs/78/checkpoint "}
	for _, w := range wantReqs {
		if r := <-s.reqs; r != w {
			t.Errorf("request = %q, want %q", r, w)
		}
	}
}
