package ctld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/jwt"
	"github.com/tide-hpc/tide/internal/munge"
)

// The user API over TCP (api_addr). It serves the unix socket's routes
// (localHandler) to clients on other hosts, and since an address proves
// nothing, every request carries its own credential in its
// Authorization header:
//
//	Authorization: MUNGE <credential>  decoded by the controller's munged
//	                                   (munge.socket): uid and gid come
//	                                   from munged, which refuses replayed
//	                                   and expired credentials itself;
//	Authorization: Bearer <jwt>        an HS256 JWT signed with jwt.key_file
//	                                   (minted by POST /api/v1/tokens);
//	                                   its user name (sun) maps to
//	                                   uid/gid through NSS.
//
// The identity is put in the request's context, where callerOf finds
// it as it finds a socket peer's: handlers cannot tell the two apart,
// except for the audit log and the job trail, which name how a remote
// caller came in. A request that does not authenticate is answered 401
// naming what was missing or wrong, before any handler runs, and its
// connection is closed.

// identKey is the context key of a remote caller's *remoteIdent.
type identKey struct{}

// remoteIdent is who a request on api_addr proved to be.
type remoteIdent struct {
	uid, gid uint32
	user     string
	method   authMethod
	// addr is the client's IP address.
	addr string
	// expires is the JWT's expiry: a token minted with this one lives no
	// longer (zero for MUNGE).
	expires time.Time
}

// jwtSkew is how far a token's iat may be ahead of the controller's
// clock (a token minted by another host's tool).
const jwtSkew = time.Minute

// mungeTimeout bounds one decode by the local munged.
const mungeTimeout = 5 * time.Second

// maxUserName bounds a token's sun before it is looked up.
const maxUserName = 256

// authState is what api_addr's authentication keeps.
type authState struct {
	// jwtKey is jwt.key_file's key; nil when JWTs are off.
	jwtKey []byte
	// log notes refused requests, at most once per peer per interval.
	log *refusalLog
	// names caches token user names' uid and gid.
	names nameCache
	// decodeMunge is Server.decodeMunge (tests stand in a decoder).
	decodeMunge func(ctx context.Context, cred string) (uid, gid uint32, err error)
}

// setupAuth reads the JWT key (refusing a key file others may read)
// and prepares the refusal log. Called once by newServer.
func (s *Server) setupAuth() error {
	s.auth.log = newRefusalLog(s.log, refusalLogEvery, "refused API request without valid credentials")
	s.auth.decodeMunge = s.decodeMunge
	if s.cl.JWT.KeyFile == "" {
		return nil
	}
	key, err := jwt.ReadKey(s.cl.JWT.KeyFile)
	if err != nil {
		return fmt.Errorf("jwt.key_file: %w", err)
	}
	s.auth.jwtKey = key
	return nil
}

// authError is a request that did not authenticate: 401
// (api.ErrUnauthenticated) with msg; reason labels it in the log.
type authError struct {
	reason, msg string
}

func (e *authError) Error() string { return e.msg }

// Unwrap returns the class error.
func (e *authError) Unwrap() error { return api.ErrUnauthenticated }

func authFailed(reason, format string, args ...any) error {
	return &authError{reason: reason, msg: "tidectld: authentication failed: " + fmt.Sprintf(format, args...)}
}

// apiHandler serves api_addr: localHandler's routes behind
// authentication. Profiles stay on the socket.
func (s *Server) apiHandler() http.Handler {
	inner := s.localHandler()
	// Browsers on the dashboard sign in with a cookie (dashboard.go).
	return s.uiGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.authenticate(r)
		if err != nil {
			var ae *authError
			if errors.As(err, &ae) {
				s.auth.log.note(time.Now(), "api", remoteIP(r), ae.reason, err.Error()+" ("+r.Method+" "+r.URL.Path+")")
				w.Header().Set("WWW-Authenticate", `Bearer realm="tide"`)
			} else { // the controller could not check (munged down): 503
				w.Header().Set("Retry-After", "1")
			}
			// Nothing of the request is read; a connection that never
			// authenticated leaves the pool.
			w.Header().Set("Connection", "close")
			writeErr(w, err)
			return
		}
		if tc := connOf(r); tc != nil {
			fresh := tc.unauth.Load()
			if err := tc.l.promote(tc); err != nil {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				writeErr(w, err)
				return
			}
			if fresh && r.ContentLength != 0 && r.Body != http.NoBody && s.cl.Limits.BodyTimeout > 0 {
				// The body's deadline was set while the connection was
				// unauthenticated, cut to limits.unauthenticated_timeout
				// (requestLimits); it gets its full body_timeout now.
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cl.Limits.BodyTimeout))
			}
		}
		if p := r.URL.Path; p == "/debug/pprof" || strings.HasPrefix(p, "/debug/pprof/") {
			writeErr(w, api.Errorf(api.ErrNotFound, "%s %s: profiles are served on the local socket only", r.Method, p))
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identKey{}, id)))
	}))
}

// authenticate checks the request's one Authorization header.
func (s *Server) authenticate(r *http.Request) (*remoteIdent, error) {
	hs := r.Header.Values("Authorization")
	switch {
	case len(hs) == 0:
		return nil, authFailed("no_credential",
			`no credential (send "Authorization: Bearer <token>" with a token from tide token, or "Authorization: MUNGE <credential>")`)
	case len(hs) > 1:
		return nil, authFailed("bad_header", "%d Authorization headers, want one", len(hs))
	}
	scheme, cred, _ := strings.Cut(strings.TrimSpace(hs[0]), " ")
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return nil, authFailed("no_credential", "Authorization header %.20q carries no credential", scheme)
	}
	addr := remoteIP(r)
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return s.jwtIdentity(cred, addr)
	case strings.EqualFold(scheme, "MUNGE"):
		ctx, cancel := context.WithTimeout(r.Context(), mungeTimeout)
		defer cancel()
		return s.mungeIdentity(ctx, cred, addr)
	}
	return nil, authFailed("bad_scheme", "unknown authorization scheme %.20q (use Bearer or MUNGE)", scheme)
}

// jwtIdentity verifies a bearer token and maps its user name to uid
// and gid.
func (s *Server) jwtIdentity(token, addr string) (*remoteIdent, error) {
	if s.auth.jwtKey == nil {
		return nil, authFailed("jwt_off", "this controller accepts no JWTs (jwt.key_file is not set); use MUNGE")
	}
	c, err := jwt.Verify(s.auth.jwtKey, token, s.now(), jwtSkew)
	if err != nil {
		reason := "jwt_invalid"
		switch {
		case errors.Is(err, jwt.ErrExpired):
			reason = "jwt_expired"
		case errors.Is(err, jwt.ErrSignature):
			reason = "jwt_signature"
		}
		return nil, authFailed(reason, "%v", err)
	}
	if len(c.User) > maxUserName || !utf8.ValidString(c.User) {
		return nil, authFailed("jwt_user", "JWT user name is not a valid user name")
	}
	uid, gid, err := s.auth.names.lookup(c.User, s.now())
	if err != nil {
		return nil, authFailed("jwt_user", "JWT names user %q, who is unknown to the controller", c.User)
	}
	return &remoteIdent{uid: uid, gid: gid, user: c.User, method: authJWT, addr: addr, expires: c.ExpiresAt}, nil
}

// mungeIdentity has the controller's munged (munge.socket) decode a
// MUNGE credential; uid and gid are munged's. A refused credential is
// 401; a munged that cannot be asked (mungedDown) is 503, since the
// client did nothing wrong and may try again.
func (s *Server) mungeIdentity(ctx context.Context, cred, addr string) (*remoteIdent, error) {
	uid, gid, err := s.auth.decodeMunge(ctx, cred)
	if err != nil {
		var down *mungedDown
		if errors.As(err, &down) {
			s.auth.log.note(time.Now(), "api", addr, "munged_down", err.Error())
			return nil, api.Errorf(api.ErrUnavailable, "tidectld cannot check MUNGE credentials now: %v", down.err)
		}
		return nil, authFailed("munge", "MUNGE credential refused: %v", err)
	}
	return &remoteIdent{uid: uid, gid: gid, user: s.users.name(uid), method: authMunge, addr: addr}, nil
}

// mungedDown wraps a failure to ask the controller's munged (as
// opposed to munged refusing the credential).
type mungedDown struct{ err error }

func (e *mungedDown) Error() string { return e.err.Error() }
func (e *mungedDown) Unwrap() error { return e.err }

// decodeMunge returns the uid and gid of a MUNGE credential, as the
// controller's munged (munge.socket) vouches for them. munged refuses a
// credential it decoded before, an expired or rewound one and one made
// with another key (401); one it could not be asked about is mungedDown
// (503). All credentials must go through this one munged: replay
// detection is per daemon.
func (s *Server) decodeMunge(ctx context.Context, cred string) (uid, gid uint32, err error) {
	c, err := munge.Decode(ctx, s.cl.Munge.Socket, cred)
	switch {
	case errors.Is(err, munge.ErrUnreachable), errors.Is(err, munge.ErrProtocol):
		return 0, 0, &mungedDown{err: err}
	case err != nil:
		return 0, 0, err
	}
	return c.UID, c.GID, nil
}

// nameCache maps token user names to uid and gid (NSS can be slow).
// Only names of tokens whose signature held are looked up, so its size
// is the number of users that hold tokens; it is emptied past
// maxCachedNames all the same.
type nameCache struct {
	mu sync.Mutex
	m  map[string]namedUser
}

type namedUser struct {
	uid, gid uint32
	at       time.Time
}

const maxCachedNames = 4096

func (c *nameCache) lookup(name string, now time.Time) (uid, gid uint32, err error) {
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < userCacheTTL && !now.Before(e.at) {
		return e.uid, e.gid, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	u64, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g64, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %s has uid %q gid %q", name, u.Uid, u.Gid)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedNames {
		c.m = map[string]namedUser{}
	}
	c.m[name] = namedUser{uid: uint32(u64), gid: uint32(g64), at: now}
	c.mu.Unlock()
	return uint32(u64), uint32(g64), nil
}

// handleToken mints a JWT (`tide token`).
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, fmt.Errorf("Token creation failed: %w", err))
		return
	}
	var capAt time.Time
	if id, ok := r.Context().Value(identKey{}).(*remoteIdent); ok {
		capAt = id.expires
	}
	resp, err := s.mintToken(s.callerOf(r), capAt, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

// mintToken signs a token for c, or with req.User for another user
// when c is an operator (for root only when c is root: an operator is
// not root). The lifespan is at most jwt.max_lifespan, and a token
// asked for with a token (capAt) expires no later than that one, so
// that a token cannot renew itself forever.
func (s *Server) mintToken(c caller, capAt time.Time, req api.TokenRequest) (api.TokenResponse, error) {
	const what = "Token creation failed"
	if !c.known {
		return api.TokenResponse{}, api.Errorf(api.ErrUnauthenticated, "%s: the caller is unknown", what)
	}
	if s.auth.jwtKey == nil {
		return api.TokenResponse{}, api.Errorf(api.ErrUnavailable,
			"%s: JWT tokens are not enabled on this cluster (jwt.key_file is not set in tidectld's configuration)", what)
	}
	maxLife := s.cl.JWT.MaxLifespan
	life := min(api.DefaultTokenLifespan, maxLife)
	switch {
	case req.LifespanS < 0:
		return api.TokenResponse{}, api.Invalid("%s: lifespan %ds is negative", what, req.LifespanS)
	case req.LifespanS > int64(maxLife/time.Second):
		return api.TokenResponse{}, api.Invalid("%s: lifespan %ds is more than the %s jwt.max_lifespan allows",
			what, req.LifespanS, maxLife)
	case req.LifespanS > 0:
		life = time.Duration(req.LifespanS) * time.Second
	}
	name := c.user
	if req.User != "" && req.User != c.user {
		if !c.admin {
			return api.TokenResponse{}, api.Errorf(api.ErrPermissionDenied,
				"Access/permission denied: only operators may get tokens for other users (--username)")
		}
		u, err := user.Lookup(req.User)
		if err != nil {
			return api.TokenResponse{}, api.Invalid("%s: Invalid user: %s", what, req.User)
		}
		if u.Uid == "0" && c.uid != 0 {
			return api.TokenResponse{}, api.Errorf(api.ErrPermissionDenied,
				"Access/permission denied: only root may get tokens for root")
		}
		name = u.Username
	}
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		// userCache names uids NSS does not know by their number; a
		// token must carry a name that maps back.
		if _, err := user.Lookup(name); err != nil {
			return api.TokenResponse{}, api.Invalid("%s: uid %s has no user name the controller can look up", what, name)
		}
	}
	now := s.now()
	exp := now.Add(life)
	if !capAt.IsZero() && exp.After(capAt) {
		exp = capAt
		if exp.Unix() <= now.Unix() {
			return api.TokenResponse{}, api.Errorf(api.ErrUnauthenticated, "%s: the token presented expires now", what)
		}
	}
	tok, err := jwt.Sign(s.auth.jwtKey, jwt.Claims{User: name, IssuedAt: now, ExpiresAt: exp})
	if err != nil {
		return api.TokenResponse{}, fmt.Errorf("%s: %w: %w", what, api.ErrInternal, err)
	}
	exp = time.Unix(exp.Unix(), 0) // as the token says: whole seconds
	s.mu.Lock()
	s.auditf(c, "token", "user "+name, "lifespan=%s expires=%s", exp.Sub(now).Round(time.Second), exp.UTC().Format(time.RFC3339))
	s.mu.Unlock()
	return api.TokenResponse{Token: tok, User: name, Expires: exp}, nil
}

// orNull is v, or Slurm's "(null)" for an unset value in `scontrol show
// config`.
func orNull(v string) string {
	if v == "" {
		return "(null)"
	}
	return v
}

// authAltTypes is `scontrol show config`'s AuthAltTypes: auth/jwt when
// tokens are on, as in Slurm.
func authAltTypes(jwtOn bool) string {
	if jwtOn {
		return "auth/jwt"
	}
	return "(null)"
}
