package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestPackedKeysOrderLikeEntries: the compact sort keys of a group give
// compareEntries's order, across urgency, aged levels (also above 10),
// negative and huge nice values, equal submit times and ids.
func TestPackedKeysOrderLikeEntries(t *testing.T) {
	tests := []struct {
		name  string
		nices []int
	}{
		{"small nice", []int{-5, 0, 5}},
		{"extreme nice", []int{-1 << 31, -2147483645, 0, 2147483645, 1<<31 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			es := make([]entry, 2000)
			for i := range es {
				es[i] = entry{job: &api.Job{ID: uint64(rng.IntN(50))}, urgent: rng.IntN(10) == 0,
					aged: 1 + rng.IntN(20), nice: tt.nices[rng.IntN(len(tt.nices))], submit: int64(rng.IntN(5))}
				es[i].id = es[i].job.ID
			}
			keys := make([]okey, len(es))
			for i := range es {
				keys[i] = okey{hi: packKey(&es[i]), submit: es[i].submit, id: es[i].id, idx: int32(i)}
			}
			slices.SortStableFunc(keys, compareKeys)
			want := slices.Clone(es)
			slices.SortStableFunc(want, func(a, b entry) int { return compareEntries(&a, &b) })
			for i := range keys {
				if c := compareEntries(&es[keys[i].idx], &want[i]); c != 0 {
					t.Fatalf("position %d: key order gives %+v, entry order %+v", i, es[keys[i].idx], want[i])
				}
			}
		})
	}
}

// BenchmarkOrderShare is the ordering part of a share pass alone: levels,
// aging, grouping by 8 queues and the round-robin over them for 10,000
// pending jobs (no placement).
func BenchmarkOrderShare(b *testing.B) {
	const pending, queues = 10000, 8
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 1))
	snap := &Snapshot{Queues: map[string]*QueueInfo{}, QOS: DefaultQOS(), DefaultQOS: api.QOSBatch}
	names := make([]string, queues)
	for k := range names {
		names[k] = string(rune('a' + k))
		snap.Queues[names[k]] = &QueueInfo{Name: names[k], Guaranteed: 512, LendLimit: -1, BorrowLimit: -1}
	}
	classes := []string{api.QOSTraining, api.QOSBatch, api.QOSInference, api.QOSDebug}
	for i := range pending {
		j := &api.Job{ID: uint64(i + 1), SubmitTime: now.Add(-time.Duration(rng.IntN(3*3600)) * time.Second)}
		j.Account, j.QOS, j.Priority = names[rng.IntN(queues)], classes[rng.IntN(len(classes))], uint32(rng.IntN(11))
		snap.Pending = append(snap.Pending, j)
	}
	b.Run("share", func(b *testing.B) {
		for b.Loop() {
			sh := newShare(snap, Config{}, now)
			o := newOrder(snap, sh, now, Config{}, &Scratch{})
			n := 0
			for e := o.next(); e != nil; e = o.next() {
				started := n%10 == 0
				if started {
					sh.account(e.queue, "u", 1)
				}
				o.done(e, started)
				n++
			}
			if n != pending {
				b.Fatalf("%d jobs ordered, want %d", n, pending)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/job")
	})
	// The order without queues and classes, for comparison.
	b.Run("legacy", func(b *testing.B) {
		for b.Loop() {
			o := newOrder(snap, nil, now, Config{}, &Scratch{})
			for e := o.next(); e != nil; e = o.next() {
				o.done(e, false)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/job")
	})
}
