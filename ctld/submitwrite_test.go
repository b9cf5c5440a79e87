package ctld

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestWriteSubmittedMatchesWriteJSON: the answer to a submission is
// written by hand when it is a job id alone, with writeJSON's bytes and
// header either way.
func TestWriteSubmittedMatchesWriteJSON(t *testing.T) {
	tests := []struct {
		name string
		resp api.SubmitResponse
	}{
		{name: "job id", resp: api.SubmitResponse{JobID: 1}},
		{name: "largest job id", resp: api.SubmitResponse{JobID: 1<<64 - 1}},
		{name: "zero (a repeat of a failed submission)", resp: api.SubmitResponse{}},
		{name: "warnings", resp: api.SubmitResponse{JobID: 7, Warnings: []string{"node count range 1-4: <min>"}}},
		{name: "test only", resp: api.SubmitResponse{TestStart: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
			TestNodes: "gpu01", TestCPUs: 8, TestPartition: "gpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			writeJSON(want, tt.resp)
			writeSubmitted(got, tt.resp)
			if diff := cmp.Diff(want.Body.String(), got.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Header(), got.Header()); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}
