package ctld

// recentSpool keeps the script and environment of the latest
// submissions until their launch. A job's spool lives in the store only
// (memory holds 10,000 pending jobs without their environments), so
// every launch used to read it back from SQLite and decode the
// environment again: on a busy cluster of short jobs that was a tenth
// of the controller's CPU, for data it had in hand a few milliseconds
// before. The cache is bounded in bytes and forgets the oldest first,
// so jobs that wait long read their spool from the store as before.
// Array jobs are not cached: their tasks share the meta record's spool.
// Called with the server's mu held.
type recentSpool struct {
	limit int // bytes of scripts and environments held at most
	bytes int
	m     map[uint64]spoolEntry
	order []uint64 // ids in submission order; some may be gone from m
}

type spoolEntry struct {
	script string
	env    []string
	size   int
}

// recentSpoolBytes bounds the cache: about 500 typical submissions
// (a short script, 35 environment variables).
const recentSpoolBytes = 1 << 20

func newRecentSpool(limit int) *recentSpool {
	return &recentSpool{limit: limit, m: make(map[uint64]spoolEntry)}
}

// put remembers id's script and environment.
func (c *recentSpool) put(id uint64, script string, env []string) {
	size := len(script)
	for _, e := range env {
		size += len(e) + 16 // the string header
	}
	if size > c.limit {
		return
	}
	if old, ok := c.m[id]; ok {
		c.bytes -= old.size
	}
	c.m[id] = spoolEntry{script: script, env: env, size: size}
	c.order = append(c.order, id)
	c.bytes += size
	for c.bytes > c.limit {
		c.drop(c.order[0])
		c.order = c.order[1:]
	}
	// Entries forgotten at launch leave ids behind in order; compact
	// when they outnumber the live ones.
	if len(c.order) > 2*len(c.m)+64 {
		live := c.order[:0]
		for _, id := range c.order {
			if _, ok := c.m[id]; ok {
				live = append(live, id)
			}
		}
		clear(c.order[len(live):])
		c.order = live
	}
}

// get returns id's script and environment if they are still held.
func (c *recentSpool) get(id uint64) (string, []string, bool) {
	e, ok := c.m[id]
	return e.script, e.env, ok
}

// drop forgets id (its job was launched, or is no longer wanted).
func (c *recentSpool) drop(id uint64) {
	if e, ok := c.m[id]; ok {
		c.bytes -= e.size
		delete(c.m, id)
	}
}
