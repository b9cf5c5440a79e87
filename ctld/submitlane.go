package ctld

import (
	"sync"
	"sync/atomic"

	"github.com/tide-hpc/tide/ctld/api"
)

// The submission lane. A scheduling pass holds the server's lock (mu)
// from its snapshot to its commit: at 2,000 nodes and a growing backlog,
// tens of milliseconds, half the time under a storm of submissions
// (passThrottle). A submission took mu four times (to look its token
// up, to read the capacity lists, to number the job, to insert it after
// its commit), so during every pass all of them stood still with the
// second core idle: BenchmarkSubmitAPI's clients spent a third of their
// time waiting for mu while the process used half of the machine, and
// make bench-scale measured about 2,100 jobs/s.
//
// Most submissions need nothing that mu guards: no dependency to look
// up, no queue to count or buffer (sharing without queues). Those go
// through the lane: their token and id come from the lane's own lock,
// the capacity they are checked against from a copy published for
// them (partCapacity), and once committed they wait in the lane, already
// answered, until the next holder of mu merges them into the job table
// as it takes the lock (serverMu). So whoever reads the jobs under mu
// sees every job whose submission was answered before it took the lock,
// as before; a pass in progress sees the new jobs at its next start.
// The others (a dependency, a queue, --test-only) take mu as before.

// submitLane holds what submissions share outside mu.
type submitLane struct {
	// mu guards the server's nextID and tokens, and stored. It is
	// taken alone or inside the server's mu, never around it.
	mu sync.Mutex
	// stored are jobs committed and answered that the job table does
	// not hold yet; waiting is set while there are any.
	stored  []*api.Job
	waiting atomic.Bool
	// caps is partCapacity's copy of the capacity lists for readers
	// without mu, replaced (never modified) by partCapacityLocked.
	caps atomic.Pointer[map[string]capacityList]
	// merge adopts stored into the server; called with the server's mu
	// held (adoptStored).
	merge func()
}

// serverMu is the server's lock. Lock and TryLock merge the jobs
// waiting in the submission lane before they return.
type serverMu struct {
	sync.Mutex
	lane *submitLane
}

// Lock locks m and merges the lane's stored jobs.
func (m *serverMu) Lock() {
	m.Mutex.Lock()
	m.adopt()
}

// TryLock is sync.Mutex's TryLock, merging the lane's stored jobs when
// it locks.
func (m *serverMu) TryLock() bool {
	if !m.Mutex.TryLock() {
		return false
	}
	m.adopt()
	return true
}

func (m *serverMu) adopt() {
	if l := m.lane; l != nil && l.waiting.Load() && l.merge != nil {
		l.merge()
	}
}

// setupLane wires the lane to the server's lock.
func (s *Server) setupLane() {
	s.mu.lane = &s.lane
	s.lane.merge = s.adoptStored
}

// newJobID hands out the next job id.
func (s *Server) newJobID() uint64 {
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	id := s.nextID
	s.nextID++
	return id
}

// nextJobID is the id the next job will get.
func (s *Server) nextJobID() uint64 {
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	return s.nextID
}

// laneStore puts the committed job j in the lane, to be merged by the
// next holder of mu (at once when mu is free).
func (s *Server) laneStore(j *api.Job) {
	s.lane.mu.Lock()
	s.lane.stored = append(s.lane.stored, j)
	s.lane.waiting.Store(true)
	s.lane.mu.Unlock()
	if s.mu.TryLock() {
		s.mu.Unlock()
	}
}

// adoptStored merges the lane's stored jobs into the job table, in the
// order they were stored. Called with mu held.
func (s *Server) adoptStored() {
	s.lane.mu.Lock()
	jobs := s.lane.stored
	s.lane.stored = nil
	s.lane.waiting.Store(false)
	s.lane.mu.Unlock()
	for _, j := range jobs {
		s.adoptJob(j)
	}
}

// adoptJob makes the committed job j a job of the server's: its script
// and environment go to the recent spool, the rest to the job table.
// Called with mu held.
func (s *Server) adoptJob(j *api.Job) {
	// The script and environment stay in the spool only, and in
	// recentSpool until the job's launch.
	if j.ArrayPending == nil {
		s.spool.put(j.ID, j.Script, j.Environment)
	}
	j.Script, j.Environment = "", nil
	s.strings.job(j)
	s.jobs[j.ID] = j
	s.addLive(j)
	s.jobsVersion++
}
