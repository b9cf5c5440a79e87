package ctld

import "github.com/tide-hpc/tide/ctld/api"

// liveJobs is Server.live: the jobs that have not ended, in the order
// they were added. That is job id order for the most part, which is the
// order the jobs were allocated in: every pass reads each pending job
// (addPending, then the pure core's ordering keys), and at 100,000 of
// them a map's hash order made each read a cache and TLB miss, a third
// of the core's time at that size. Walking them in memory order lets
// the hardware fetch ahead.
type liveJobs struct {
	// at is a job's index in list; list holds nil where a job was
	// removed (holes of them), until compact.
	at    map[uint64]int
	list  []*api.Job
	holes int
}

func newLiveJobs() liveJobs { return liveJobs{at: map[uint64]int{}} }

// add puts j in, or replaces the record of the same id.
func (l *liveJobs) add(j *api.Job) {
	if i, ok := l.at[j.ID]; ok {
		l.list[i] = j
		return
	}
	l.at[j.ID] = len(l.list)
	l.list = append(l.list, j)
}

// walk calls keep for every job in order and removes those it refuses.
func (l *liveJobs) walk(keep func(j *api.Job) bool) {
	for i, j := range l.list {
		if j == nil || keep(j) {
			continue
		}
		delete(l.at, j.ID)
		l.list[i] = nil
		l.holes++
	}
	l.compact()
}

// each calls f for every job in order.
func (l *liveJobs) each(f func(j *api.Job)) {
	for _, j := range l.list {
		if j != nil {
			f(j)
		}
	}
}

// len is the number of jobs.
func (l *liveJobs) len() int { return len(l.at) }

// compact closes the holes once they are half the list: moving a job
// rewrites its index, so doing it rarely keeps removals O(1) amortised.
func (l *liveJobs) compact() {
	if l.holes < 1024 || l.holes*2 < len(l.list) {
		return
	}
	n := 0
	for _, j := range l.list {
		if j != nil {
			l.list[n] = j
			l.at[j.ID] = n
			n++
		}
	}
	clear(l.list[n:])
	l.list, l.holes = l.list[:n], 0
}
