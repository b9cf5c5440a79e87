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

// caller is who is asking: as the kernel says (SO_PEERCRED) on the unix
// socket, as a verified credential says on api_addr (apiauth.go).
type caller struct {
	uid, gid uint32
	pid      int32
	user     string
	admin    bool
	known    bool
	// auth is how the identity was established; addr is the client's
	// IP address on TCP ("" on the socket).
	auth authMethod
	addr string
}

// authMethod is how a caller was authenticated.
type authMethod uint8

const (
	authNone   authMethod = iota
	authSocket            // SO_PEERCRED on the unix socket
	authMunge             // a MUNGE credential on api_addr
	authJWT               // a JWT on api_addr
)

// String names the method in audit records and the job trail.
func (m authMethod) String() string {
	switch m {
	case authSocket:
		return "socket"
	case authMunge:
		return "munge"
	case authJWT:
		return "jwt"
	}
	return "none"
}

// remote reports whether the caller came over TCP.
func (c caller) remote() bool { return c.auth == authMunge || c.auth == authJWT }

// authNote says, for trail messages, how a remote caller came in
// (" (jwt, 10.1.2.3)"); "" on the socket, whose callers the trail has
// always named alone.
func (c caller) authNote() string {
	if !c.remote() {
		return ""
	}
	return " (" + c.auth.String() + ", " + c.addr + ")"
}

// authDetail is authNote for audit details ("auth=jwt addr=10.1.2.3"),
// "" on the socket.
func (c caller) authDetail() string {
	if !c.remote() {
		return ""
	}
	return "auth=" + c.auth.String() + " addr=" + c.addr
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

// callerOf resolves the request's caller: the socket peer's
// credentials, or the identity api_addr verified (apiauth.go). known is
// false without either (never the case on the socket, nor past
// api_addr's authentication). Operators are the same users either way.
func (s *Server) callerOf(r *http.Request) caller {
	if cred, ok := r.Context().Value(credKey{}).(syscall.Ucred); ok {
		c := caller{uid: cred.Uid, gid: cred.Gid, pid: cred.Pid, known: true, auth: authSocket}
		c.user = s.users.name(c.uid)
		c.admin = s.isOperator(c.uid, c.user)
		return c
	}
	if id, ok := r.Context().Value(identKey{}).(*remoteIdent); ok {
		c := caller{uid: id.uid, gid: id.gid, user: id.user, known: true, auth: id.method, addr: id.addr}
		c.admin = s.isOperator(c.uid, c.user)
		return c
	}
	return caller{}
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
