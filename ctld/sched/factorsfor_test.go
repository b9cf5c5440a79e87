package sched

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestFactorsForMatchesPass checks that the factors the controller lists
// (sprio) are the scores a pass orders by, fair share included.
func TestFactorsForMatchesPass(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	m := DefaultMultifactor
	m.SizeWeight = 200
	jobs := []*api.Job{
		mfJob(1, now.Add(-3*time.Hour), 3600, 8),
		mfJob(2, now.Add(-20*time.Hour), 7*24*3600, 1),
		mfJob(3, now.Add(-time.Minute), 600, 2),
		nil,
		mfJob(4, now, api.Infinite, 0),
	}
	jobs[0].Account, jobs[1].Account, jobs[2].Account, jobs[4].Account = "a", "b", "c", "a"
	jobs[2].Nice = 50
	snaps := map[string]*Snapshot{
		"no usage":    {},
		"even shares": {Usage: map[string]float64{"a": 3000, "b": 1000}},
		"guarantees": {Usage: map[string]float64{"a": 3000, "b": 1000, "c": 10},
			Queues: map[string]*QueueInfo{"a": {Name: "a", Guaranteed: 8}, "b": {Name: "b", Guaranteed: 24}}},
	}
	for name, snap := range snaps {
		t.Run(name, func(t *testing.T) {
			got := m.FactorsFor(jobs, snap, now)
			if len(got) != len(jobs) {
				t.Fatalf("%d factors for %d jobs", len(got), len(jobs))
			}
			keys := pendingKeys(nil, jobs, snap, now, Config{Priority: &m}, nil)
			byID := map[uint64]float64{}
			for _, k := range keys {
				if k.job != nil {
					byID[k.job.ID] = k.score()
				}
			}
			for i, j := range jobs {
				if j == nil {
					if got[i] != (Factors{}) {
						t.Errorf("nil job: factors %+v, want zero", got[i])
					}
					continue
				}
				if got[i].Priority != byID[j.ID] {
					t.Errorf("job %d: priority %v, the pass scores %v", j.ID, got[i].Priority, byID[j.ID])
				}
			}
			if name == "guarantees" && !(got[1].Fairshare > got[0].Fairshare) {
				t.Errorf("b (under its guarantee) has fair share %v, not above a's %v", got[1].Fairshare, got[0].Fairshare)
			}
		})
	}
}

func TestShareMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap Snapshot
		want bool
	}{
		{"nothing", Snapshot{}, false},
		{"usage only", Snapshot{Usage: map[string]float64{"a": 1}}, false},
		{"queues", Snapshot{Queues: map[string]*QueueInfo{"a": {Name: "a"}}}, true},
		{"classes", Snapshot{QOS: map[string]*QOSInfo{"batch": {}}}, true},
	} {
		if got := tc.snap.ShareMode(); got != tc.want {
			t.Errorf("%s: ShareMode %v, want %v", tc.name, got, tc.want)
		}
	}
}
