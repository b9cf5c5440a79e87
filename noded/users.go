package noded

import (
	"log/slog"
	"os/user"
	"strconv"
	"sync"
	"time"
)

// groupCacheTTL is how long resolved groups are reused: a group change
// reaches new jobs within it, and a burst of jobs of one user asks NSS
// (LDAP, SSSD) once rather than once per job, as Slurm's group cache does.
const groupCacheTTL = time.Minute

// groupCache remembers userGroups results per uid and gid.
type groupCache struct {
	mu      sync.Mutex
	entries map[[2]uint32]groupEntry
}

type groupEntry struct {
	groups []uint32
	at     time.Time
}

// get returns the supplementary groups of uid (see userGroups), cached.
func (c *groupCache) get(uid, gid uint32, log *slog.Logger) []uint32 {
	key := [2]uint32{uid, gid}
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < groupCacheTTL {
		return e.groups
	}
	groups := userGroups(uid, gid, log)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[[2]uint32]groupEntry)
	}
	c.entries[key] = groupEntry{groups: groups, at: time.Now()}
	c.mu.Unlock()
	return groups
}

// userGroups returns the supplementary groups of uid, or just gid when
// the user is unknown on this node.
func userGroups(uid, gid uint32, log *slog.Logger) []uint32 {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		log.Warn("user not found, running with its primary group only", "uid", uid, "err", err)
		return []uint32{gid}
	}
	ids, err := u.GroupIds()
	if err != nil {
		log.Warn("cannot list user groups", "uid", uid, "err", err)
		return []uint32{gid}
	}
	out := []uint32{gid}
	for _, s := range ids {
		n, err := strconv.ParseUint(s, 10, 32)
		if err == nil && uint32(n) != gid {
			out = append(out, uint32(n))
		}
	}
	return out
}
