package ctld

import (
	"net"
	"net/http"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// caller is who is asking, as the kernel says (SO_PEERCRED) for the unix
// socket.
type caller struct {
	uid, gid uint32
	pid      int32
	user     string
	admin    bool
	known    bool
}

type credKey struct{}

// peerCred returns the credentials of the process at the other end of a
// unix socket connection. A client cannot claim another identity: the
// kernel fills them in at connect time.
func peerCred(c net.Conn) (syscall.Ucred, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return syscall.Ucred{}, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return syscall.Ucred{}, false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil || cred == nil {
		return syscall.Ucred{}, false
	}
	return *cred, true
}

// callerOf resolves the request's caller; known is false without
// credentials (never the case on the unix socket).
func (s *Server) callerOf(r *http.Request) caller {
	cred, ok := r.Context().Value(credKey{}).(syscall.Ucred)
	if !ok {
		return caller{}
	}
	c := caller{uid: cred.Uid, gid: cred.Gid, pid: cred.Pid, known: true}
	c.user = s.users.name(c.uid)
	c.admin = s.isOperator(c.uid, c.user)
	return c
}

// isOperator reports whether uid (named user) may act on every job and
// node: root, the controller's own user, and the configured operators.
func (s *Server) isOperator(uid uint32, user string) bool {
	if uid == 0 || uid == s.self {
		return true
	}
	for _, op := range s.cl.Operators {
		if op == user {
			return true
		}
	}
	return false
}

// privilegedPeer reports whether a socket peer may take the operator
// reserve of connections (limitListener.privileged). The name is looked
// up only for uids that are not root or the controller's own.
func (s *Server) privilegedPeer(p connPeer) bool {
	if !p.hasCred {
		return false
	}
	if p.cred.Uid == 0 || p.cred.Uid == s.self {
		return true
	}
	return len(s.cl.Operators) > 0 && s.isOperator(p.cred.Uid, s.users.name(p.cred.Uid))
}

// userCache caches uid and gid lookups (NSS can be slow).
type userCache struct {
	mu     sync.Mutex
	names  map[uint32]cached
	groups map[uint32]cached
}

type cached struct {
	name string
	at   time.Time
}

const userCacheTTL = 5 * time.Minute

func newUserCache() *userCache {
	return &userCache{names: map[uint32]cached{}, groups: map[uint32]cached{}}
}

func (u *userCache) lookup(m map[uint32]cached, id uint32, find func(string) (string, error)) string {
	u.mu.Lock()
	c, ok := m[id]
	u.mu.Unlock()
	if ok && time.Since(c.at) < userCacheTTL {
		return c.name
	}
	name, err := find(strconv.FormatUint(uint64(id), 10))
	if err != nil || name == "" {
		name = strconv.FormatUint(uint64(id), 10)
	}
	u.mu.Lock()
	m[id] = cached{name: name, at: time.Now()}
	u.mu.Unlock()
	return name
}

// name returns the user name of uid (the number when unknown).
func (u *userCache) name(uid uint32) string {
	return u.lookup(u.names, uid, func(id string) (string, error) {
		x, err := user.LookupId(id)
		if err != nil {
			return "", err
		}
		return x.Username, nil
	})
}

// group returns the group name of gid (the number when unknown).
func (u *userCache) group(gid uint32) string {
	return u.lookup(u.groups, gid, func(id string) (string, error) {
		x, err := user.LookupGroupId(id)
		if err != nil {
			return "", err
		}
		return x.Name, nil
	})
}
