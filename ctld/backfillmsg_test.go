package ctld

import (
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// TestBackfillMessageNamesOnlyItsNodes: a backfilled start's event names
// the reservations on the nodes it took, at most maxBackfillNamed, and
// counts the rest, so that a pass with hundreds of reservations does not
// store them all with every start.
func TestBackfillMessageNamesOnlyItsNodes(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	plan := &sched.Plan{}
	for i := range 8 {
		plan.Reservations = append(plan.Reservations, sched.Reservation{JobID: uint64(100 + i), At: at, Nodes: []string{"gpu01"}})
	}
	plan.Reservations = append(plan.Reservations, sched.Reservation{JobID: 200, At: at, Nodes: []string{"gpu02", "gpu03"}})
	tests := []struct {
		name  string
		nodes []string
		want  []string
		not   []string
	}{
		{"other node", []string{"gpu03"}, []string{"job 200 at"}, []string{"job 100", "more"}},
		{"capped", []string{"gpu01"}, []string{"job 100 at", "job 104 at", "3 more"}, []string{"job 105", "job 200"}},
		{"no reservation on its nodes", []string{"gpu09"}, nil, []string{"reserved on its nodes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := sched.Start{JobID: 1, Backfilled: true}
			for _, n := range tc.nodes {
				st.Alloc = append(st.Alloc, api.NodeAlloc{Node: n})
			}
			msg := backfillMessage(st, plan)
			if !strings.HasPrefix(msg, "backfilled: ") {
				t.Fatalf("message %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("message %q has %q", msg, n)
				}
			}
		})
	}
}
