package noded

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestDropLog(t *testing.T) {
	const memory = 10 * time.Minute
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newDropLog()
	ref := func(id uint64) api.JobRef { return api.JobRef{JobID: id} }
	// 5,000 drops a second apart: only the last ten minutes' stay.
	for i := range 5000 {
		l.add(ref(uint64(i)), t0.Add(time.Duration(i)*time.Second), memory)
	}
	last := t0.Add(4999 * time.Second)
	for _, tt := range []struct {
		id   uint64
		want bool
	}{{0, false}, {4398, false}, {4399, true}, {4999, true}, {5000, false}} {
		if got := l.has(ref(tt.id)); got != tt.want {
			t.Errorf("has(%d) = %v, want %v (last drop at %v)", tt.id, got, tt.want, last)
		}
	}
	if len(l.at) != 601 {
		t.Errorf("remembers %d, want 601", len(l.at))
	}
	if len(l.order)-l.head != 601 || cap(l.order) > 4*601 {
		t.Errorf("queue holds %d live of len %d cap %d: not compacted", len(l.order)-l.head, len(l.order), cap(l.order))
	}
	// A ref dropped again (a requeued incarnation repeated) is kept by
	// its newer entry when the older one expires.
	l.add(ref(4999), last.Add(time.Second), memory)
	l.add(ref(1), last.Add(memory+time.Second), memory) // expires 4999's first entry only
	if !l.has(ref(4999)) {
		t.Error("a ref dropped again was forgotten with its older entry")
	}
}
