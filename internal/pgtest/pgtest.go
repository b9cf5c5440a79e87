// Package pgtest runs a private PostgreSQL server for tests: initdb in a
// temporary directory, postgres on 127.0.0.1 with a free port and a
// private unix socket directory, a fresh database per test, and the
// server stopped by its pid when the test binary ends. It never touches
// a system cluster. Tests skip, saying why, when PostgreSQL is not
// installed (Debian package postgresql).
//
// One server serves a whole test binary; it starts on first use, so a
// run that needs no database pays nothing:
//
//	var pg pgtest.Lazy
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pg.Stop()
//		os.Exit(code)
//	}
//
//	func TestX(t *testing.T) { url := pg.Database(t) ... }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// superuser is the role initdb creates; tests connect as it.
const superuser = "tide"

// ErrNotInstalled is returned by Start when no PostgreSQL server
// binaries are found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (Debian: apt-get install postgresql)")

// BinDir returns the directory holding initdb and postgres, or "" when
// PostgreSQL is not installed. Debian keeps them out of PATH, under
// /usr/lib/postgresql/<major>/bin; the newest major wins. TIDE_PG_BIN
// names the directory instead (one without the binaries counts as not
// installed, which is how to run a test binary's PostgreSQL pass as
// skipped).
func BinDir() string {
	if d := os.Getenv("TIDE_PG_BIN"); d != "" {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
		return ""
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	if p, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

// major is the version number in /usr/lib/postgresql/<major>/bin.
func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Server is a private PostgreSQL server started by Start.
type Server struct {
	// Dir holds the data directory, the socket directory, the password
	// file and the server's log; Stop removes it.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// PID is the postmaster's process id.
	PID int

	password string
	cmd      *exec.Cmd
	logFile  string
	exited   chan struct{}
	nextDB   atomic.Int64

	stopOnce sync.Once
	stopErr  error
}

// Start initialises a cluster in a new temporary directory and starts
// postgres on it. PostgreSQL refuses to run as root, so as root the
// server runs as the "postgres" system user the Debian package creates,
// owning the directory. It returns ErrNotInstalled when there are no
// server binaries.
func Start() (*Server, error) {
	bin := BinDir()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	cred, uid, gid, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tide-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{Dir: dir, logFile: filepath.Join(dir, "postgres.log")}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("pgtest: password: %w", err)
	}
	s.password = hex.EncodeToString(pw)
	pwFile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(s.password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	sockDir := filepath.Join(dir, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		for _, p := range []string{dir, pwFile, sockDir} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, fmt.Errorf("pgtest: give %s to the server user: %w", p, err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	// Host connections need the password; local (socket) ones are
	// trusted, but the socket lives in a directory only the server user
	// can enter.
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--pwfile", pwFile, "--auth-host=scram-sha-256", "--auth-local=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	// A port picked free may be taken before postgres binds it: try a
	// few.
	for attempt := 0; ; attempt++ {
		err := s.startOnce(bin, data, sockDir, cred)
		if err == nil {
			break
		}
		if attempt == 2 {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// serverUser is the credential postgres runs with: nil to run as the
// current user, or the postgres system user when the caller is root.
func serverUser() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: running as root, and there is no postgres user to run the server as: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startOnce starts postgres on a fresh port and waits until it accepts
// connections.
func (s *Server) startOnce(bin, data, sockDir string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pgtest: pick a port: %w", err)
	}
	logf, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	// Durability is worthless in a throw-away cluster and fsyncs are
	// most of a small commit's cost.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", sockDir,
		"-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	// SIGQUIT (immediate shutdown) if the test binary dies first, so no
	// server outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.PID, s.Port, s.exited = cmd, cmd.Process.Pid, port, exited

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("pgtest: postgres exited during start-up:\n%s", s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("pgtest: postgres did not accept connections within a minute: %v\n%s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logFile)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// url is the connection URL of database db.
func (s *Server) url(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.password, s.Port, db)
}

// SocketURL is the connection URL of database db over the server's unix
// socket (trusted, in a directory only the server's user and root may
// enter): for a client in another network namespace, whose 127.0.0.1 is
// not the server's.
func (s *Server) SocketURL(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", superuser, db, filepath.Join(s.Dir, "sock"), s.Port)
}

// CreateDatabase creates a new, empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (name, url string, err error) {
	name = fmt.Sprintf("t%d", s.nextDB.Add(1))
	if err := s.admin(ctx, `CREATE DATABASE `+name); err != nil {
		return "", "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return name, s.url(name), nil
}

// DropDatabase drops a database made by CreateDatabase, ending its
// sessions.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.admin(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("pgtest: drop database %s: %w", name, err)
	}
	return nil
}

// admin runs one statement in the maintenance database.
func (s *Server) admin(ctx context.Context, stmt string) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, stmt)
	return err
}

// Stop shuts the server down (SIGINT to its pid: PostgreSQL's fast
// shutdown, SIGKILL after 30 s) and removes its directory. It is safe to
// call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.exited
				s.stopErr = fmt.Errorf("pgtest: postgres (pid %d) ignored SIGINT for 30 s and was killed", s.PID)
			}
		}
		if err := os.RemoveAll(s.Dir); err != nil {
			s.stopErr = errors.Join(s.stopErr, err)
		}
	})
	return s.stopErr
}

// Lazy is a Server started on first use and shared by a test binary.
// The zero value is ready; call Stop from TestMain after m.Run.
type Lazy struct {
	once sync.Once
	srv  *Server
	err  error
}

// Server starts the server on the first call and returns it; it skips
// tb when PostgreSQL is not installed and fails it when the server does
// not start.
func (l *Lazy) Server(tb testing.TB) *Server {
	tb.Helper()
	l.once.Do(func() { l.srv, l.err = Start() })
	if errors.Is(l.err, ErrNotInstalled) {
		tb.Skipf("skipping the PostgreSQL pass: %v", l.err)
	}
	if l.err != nil {
		tb.Fatalf("private PostgreSQL: %v", l.err)
	}
	return l.srv
}

// Database creates a fresh database for tb, dropped when tb ends, and
// returns its URL. See Server for skips and failures.
func (l *Lazy) Database(tb testing.TB) string {
	tb.Helper()
	s := l.Server(tb)
	ctx := context.Background()
	name, url, err := s.CreateDatabase(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.DropDatabase(ctx, name); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return url
}

// Stop stops the server if it was started.
func (l *Lazy) Stop() error {
	if l.srv == nil {
		return nil
	}
	return l.srv.Stop()
}

// Installed reports whether PostgreSQL's server binaries are present,
// for messages; Lazy.Server skips by itself.
func Installed() bool { return BinDir() != "" }
