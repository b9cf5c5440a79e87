package ctld

import (
	"sync"
	"time"
)

// listCache keeps the last encoded binary listings per query. squeue is run
// in loops (watch, scripts polling for their jobs) far more often than
// jobs change; an unchanged listing of 10,000 jobs is then sent without
// copying and encoding it again. The controller's clock travels in a
// header, so a cached body never shows a stale "now".
type listCache struct {
	mu      sync.Mutex
	entries map[string]cachedList
	now     func() time.Time
}

type cachedList struct {
	version uint64
	body    []byte
}

// maxCachedLists bounds the cache; past it, it starts over.
const maxCachedLists = 16

// get returns the body for query at version, building it with build on a
// miss, and the time to send with it.
func (c *listCache) get(query string, version uint64, build func() []byte) ([]byte, time.Time) {
	c.mu.Lock()
	e, ok := c.entries[query]
	c.mu.Unlock()
	if ok && e.version == version {
		return e.body, c.now()
	}
	body := build()
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCachedLists {
		c.entries = make(map[string]cachedList, maxCachedLists)
	}
	c.entries[query] = cachedList{version: version, body: body}
	c.mu.Unlock()
	return body, c.now()
}

// listVersion is the version of the job table as listings see it.
func (s *Server) listVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobsVersion
}
