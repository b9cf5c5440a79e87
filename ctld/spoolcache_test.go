package ctld

import (
	"slices"
	"strings"
	"testing"
)

func TestRecentSpool(t *testing.T) {
	env := []string{"HOME=/home/alice", "PATH=/usr/bin"}
	entry := len("#!/bin/sh\n") + len(env[0]) + len(env[1]) + 32
	c := newRecentSpool(10 * entry)
	for id := uint64(1); id <= 15; id++ {
		c.put(id, "#!/bin/sh\n", env)
	}
	// The oldest five went to make room.
	for id := uint64(1); id <= 15; id++ {
		_, got, ok := c.get(id)
		if want := id > 5; ok != want {
			t.Errorf("get(%d) ok = %v, want %v", id, ok, want)
		} else if ok && !slices.Equal(got, env) {
			t.Errorf("get(%d) env = %q", id, got)
		}
	}
	if c.bytes != 10*entry {
		t.Errorf("bytes = %d, want %d", c.bytes, 10*entry)
	}
	// Launched jobs are dropped; their room is free again.
	c.drop(6)
	c.drop(6)
	if _, _, ok := c.get(6); ok || c.bytes != 9*entry {
		t.Errorf("after drop: ok = %v, bytes = %d, want %d", ok, c.bytes, 9*entry)
	}
	c.put(16, "#!/bin/sh\n", env)
	if _, _, ok := c.get(7); !ok {
		t.Error("a put into free room evicted an entry")
	}
	// A spool larger than the whole cache is not kept, nor does it evict.
	c.put(17, "#!/bin/sh\n"+strings.Repeat("x", 11*entry), nil)
	if _, _, ok := c.get(17); ok {
		t.Error("an oversized spool was cached")
	}
	if _, _, ok := c.get(7); !ok {
		t.Error("an oversized spool evicted others")
	}
	// Many launches: the order list stays proportional to what is held.
	for id := uint64(100); id < 10_000; id++ {
		c.put(id, "#!/bin/sh\n", env)
		c.drop(id)
	}
	if len(c.order) > 2*len(c.m)+66 {
		t.Errorf("order holds %d ids for %d entries", len(c.order), len(c.m))
	}
}
