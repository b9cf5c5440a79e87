package noded

import (
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// dropLog remembers dropped job incarnations for droppedMemory. Entries
// come in time order, so the expired ones are always at the front of
// the queue and forgetting them costs nothing per drop: a node that
// runs thousands of short jobs within the memory window no longer walks
// the whole set on every drop, as the map-only version did.
type dropLog struct {
	at    map[api.JobRef]time.Time
	order []dropEntry
	head  int
}

type dropEntry struct {
	ref api.JobRef
	at  time.Time
}

func newDropLog() dropLog { return dropLog{at: make(map[api.JobRef]time.Time)} }

// has reports whether ref was dropped within the memory window.
func (l *dropLog) has(ref api.JobRef) bool {
	_, ok := l.at[ref]
	return ok
}

// add records ref as dropped at now, and forgets entries older than
// memory.
func (l *dropLog) add(ref api.JobRef, now time.Time, memory time.Duration) {
	for l.head < len(l.order) && now.Sub(l.order[l.head].at) > memory {
		e := l.order[l.head]
		// A ref dropped again later has a newer entry further on.
		if t, ok := l.at[e.ref]; ok && t.Equal(e.at) {
			delete(l.at, e.ref)
		}
		l.order[l.head] = dropEntry{}
		l.head++
	}
	// Reuse the front once half the queue is spent.
	if l.head > 0 && l.head >= len(l.order)/2 {
		n := copy(l.order, l.order[l.head:])
		clear(l.order[n:])
		l.order = l.order[:n]
		l.head = 0
	}
	l.at[ref] = now
	l.order = append(l.order, dropEntry{ref: ref, at: now})
}
