package noded

import (
	"log/slog"
	"os/user"
	"strconv"
)

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
