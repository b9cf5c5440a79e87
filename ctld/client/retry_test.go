package client

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestSubmitRidesOutAnUnreachableController(t *testing.T) {
	unavailable := answerJSON(503, `{"error":{"code":"unavailable","message":"Batch job submission failed: could not store the job: disk I/O error"}}`)
	ok := answerJSON(200, `{"job_id":42}`)
	tests := []struct {
		name     string
		answers  []string // "" closes the connection without an answer
		window   time.Duration
		testOnly bool
		// oldController: the first try's token is refused, the second
		// carries none.
		oldController bool
		tries         int
		wantID        uint64
		wantErr       string
	}{
		{name: "broken connection, then 503, then the job", answers: []string{"", unavailable, ok},
			window: time.Minute, tries: 3, wantID: 42},
		{name: "no window: one try", answers: []string{"", ok}, tries: 1, wantErr: "cannot reach tidectld"},
		{name: "window spent", answers: []string{"", "", "", "", "", "", "", "", ""}, window: 700 * time.Millisecond,
			tries: -1, wantErr: "gave up after"},
		{name: "other errors are final", answers: []string{answerJSON(400, `{"error":{"code":"invalid_argument","message":"bad"}}`), ok},
			window: time.Minute, tries: 1, wantErr: "bad"},
		{name: "test-only carries no token", answers: []string{ok}, testOnly: true, window: time.Minute, tries: 1, wantID: 42},
		{name: "a controller without tokens", answers: []string{answerJSON(400, `{"error":{"code":"invalid_argument","message":"bad request body: json: unknown field \"token\""}}`), ok},
			window: time.Minute, tries: 2, wantID: 42, oldController: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRawServer(t, tt.answers...)
			c := s.client()
			defer c.Close()
			var slept time.Duration
			c.sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
			c.SetRetryWindow(tt.window)
			var told []Retry
			c.OnRetry(func(r Retry) { told = append(told, r) })
			r, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "x"}, TestOnly: tt.testOnly})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if r.JobID != tt.wantID {
				t.Errorf("job id %d, want %d", r.JobID, tt.wantID)
			}
			if slept > tt.window {
				t.Errorf("waited %s, more than the window %s", slept, tt.window)
			}
			var tokens []string
			for {
				select {
				case req := <-s.reqs:
					var sr api.SubmitRequest
					if err := json.Unmarshal([]byte(strings.TrimPrefix(req, "POST /api/v1/jobs ")), &sr); err != nil {
						t.Fatalf("request %q: %v", req, err)
					}
					tokens = append(tokens, sr.Token)
					continue
				default:
				}
				break
			}
			if tt.tries >= 0 && len(tokens) != tt.tries {
				t.Fatalf("%d tries, want %d", len(tokens), tt.tries)
			}
			if len(told) != len(tokens)-1 && tt.wantErr == "" && !tt.oldController {
				t.Errorf("told %d times of %d tries", len(told), len(tokens))
			}
			if tt.oldController {
				if len(tokens) != 2 || tokens[0] == "" || tokens[1] != "" {
					t.Fatalf("tokens %q, want one, then none", tokens)
				}
				return
			}
			for _, tok := range tokens {
				if tt.testOnly && tok != "" || !tt.testOnly && (tok == "" || tok != tokens[0]) {
					t.Fatalf("tokens %q", tokens)
				}
			}
			if len(told) > 0 && !errors.Is(told[0].Err, api.ErrUnavailable) {
				t.Errorf("hook told of %v", told[0].Err)
			}
		})
	}
}

func TestNewTokenIsFresh(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := NewToken()
		if len(tok) != 32 || seen[tok] {
			t.Fatalf("token %q (seen before: %v)", tok, seen[tok])
		}
		seen[tok] = true
	}
}

func TestParseRetryWindow(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultRetryWindow, false},
		{"0", 0, false},
		{"90", 90 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"-5s", 0, true},
		{"soon", 0, true},
		{"99999999999", 0, true},
	} {
		got, err := ParseRetryWindow(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseRetryWindow(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestStepCallsRideOut: a step's end is repeated while the controller
// cannot be reached (the first report stands); a step's creation only
// when it surely created nothing: never sent, or answered 503.
func TestStepCallsRideOut(t *testing.T) {
	unavailable := answerJSON(503, `{"error":{"code":"unavailable","message":"record end of step 7.1: disk I/O error"}}`)
	ok := answerJSON(200, `{}`)
	for _, tc := range []struct {
		name    string
		answers []string
		call    func(c *Client) error
		tries   int
		wantErr bool
	}{
		{"end: broken, 503, done", []string{"", unavailable, ok},
			func(c *Client) error { return c.EndStep(context.Background(), 7, 1, api.StepEnd{}) }, 3, false},
		{"create: 503, then created", []string{unavailable, ok},
			func(c *Client) error { _, err := c.CreateStep(context.Background(), 7, api.StepRequest{}); return err }, 2, false},
		{"create: broken after sending is final", []string{"", ok},
			func(c *Client) error { _, err := c.CreateStep(context.Background(), 7, api.StepRequest{}); return err }, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, tc.answers...)
			c := s.client()
			defer c.Close()
			c.sleep = func(context.Context, time.Duration) error { return nil }
			c.SetRetryWindow(time.Minute)
			if err := tc.call(c); (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if n := len(s.reqs); n != tc.tries {
				t.Fatalf("%d tries, want %d", n, tc.tries)
			}
		})
	}
	// A socket that is not there (the controller restarting): tried
	// until the window is spent.
	c := NewUnix(filepath.Join(t.TempDir(), "gone.sock"))
	tries := 0
	c.sleep = func(context.Context, time.Duration) error { tries++; return nil }
	c.SetRetryWindow(2 * time.Second)
	_, err := c.CreateStep(context.Background(), 7, api.StepRequest{})
	if err == nil || !strings.Contains(err.Error(), "gave up after") || tries < 2 {
		t.Fatalf("err = %v after %d waits", err, tries)
	}
}
