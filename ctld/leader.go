package ctld

// Primary and standby controllers (issue 26). Controllers that share a
// store take turns through its leader lease (accounting/lease.go): the
// holder is the primary and acts; the others are standbys, which listen
// on the same kinds of addresses, answer pings, and turn every other
// request away with 503 naming the primary, so that clients and node
// daemons configured with every controller move on to it.
//
// A term as primary: take the lease, fence the store at its epoch (a
// write after another controller took over fails), renew the lease
// every third of its TTL, recover the state from the store, serve.
// It ends when the lease is lost — another controller holds it, or no
// renewal got through within the TTL less a margin, measured on this
// controller's monotonic clock from the moment the last successful
// renewal was sent, which is before the store stamped it: the primary
// stops before the lease can lapse in the store. What it had not
// written is lost with it, as with a crash; what it wrote the next
// primary recovers. A launch is only ever delivered after the job's
// start commits (server.go), and the fence refuses that commit to a
// controller that lost the lease, so no job starts twice.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/gcfloor"
	"github.com/tide-hpc/tide/internal/stepcred"
)

// haState is a Server's place among the controllers.
type haState struct {
	// name is ha.controller_name (or the host name).
	name string
	// epoch is the lease epoch of this primary's term (0: a Server run
	// without a lease, as tests do).
	epoch uint64
	// view is a standby's latest reading of the lease.
	view atomic.Pointer[accounting.Lease]
	// fenced is called when a write finds the store fenced: another
	// controller took over, and this term ends at once.
	fenced func()
	// valid is this term's lease validity, kept by the renewals (nil
	// for a Server run without a lease).
	valid *leaseValidity
}

// leaseValidity is until when a term's lease, as last renewed, surely
// holds. Past it the primary answers nothing until a renewal gets
// through: after a pause (SIGSTOP, a stalled VM) a standby may have
// taken over, and an answer of this controller, a node's commands above
// all, could undo what the new primary did (tell a node to forget the
// jobs it started).
type leaseValidity struct {
	// until is monotonic time since leaseClock, in nanoseconds.
	until atomic.Int64
}

// leaseClock is the origin of leaseValidity: its monotonic reading
// makes every later time.Since a monotonic duration.
var leaseClock = time.Now()

// set records that the lease holds until t.
func (v *leaseValidity) set(t time.Time) { v.until.Store(int64(t.Sub(leaseClock))) }

// left is how long the lease surely holds yet (negative: it may have
// lapsed).
func (v *leaseValidity) left() time.Duration {
	return time.Duration(v.until.Load() - int64(time.Since(leaseClock)))
}

// lapsed reports whether this primary's lease may have lapsed (never
// for a Server run without a lease).
func (h *haState) lapsed() bool { return h.valid != nil && h.valid.left() < 0 }

// errLapsed is the answer of a primary whose lease may have lapsed.
func (s *Server) errLapsed() error {
	return api.Errorf(api.ErrUnavailable, "tidectld %s cannot confirm its leader lease (epoch %d): another controller may be primary", s.ha.name, s.ha.epoch)
}

// leaseStore is the store as the leader loop uses it.
type leaseStore interface {
	Store
	AcquireLease(ctx context.Context, bid accounting.LeaseBid) (accounting.Lease, bool, error)
	RenewLease(ctx context.Context, epoch uint64, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, epoch uint64) error
	CurrentLease(ctx context.Context) (accounting.Lease, error)
	SetFence(epoch uint64)
}

var _ leaseStore = (*accounting.Store)(nil)

// withPing answers pings before h (and before its authentication: a
// ping tells only who is primary), and turns every request away while
// the lease may have lapsed.
func (s *Server) withPing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.PathPing && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.handlePing(w)
			return
		}
		if s.ha.lapsed() {
			w.Header().Set("Retry-After", "1")
			writeErr(w, s.errLapsed())
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ping is this controller's PingResponse.
func (s *Server) ping() api.PingResponse {
	p := api.PingResponse{Name: s.ha.name, Cluster: s.cl.ClusterName, Role: api.RolePrimary}
	if l := s.ha.view.Load(); l != nil {
		p.Role = api.RoleStandby
		if l.Live() {
			p.Primary, p.PrimaryAddr, p.PrimaryAPIAddr, p.Epoch = l.Holder, l.Addr, l.APIAddr, l.Epoch
		}
		return p
	}
	p.Primary, p.PrimaryAddr, p.PrimaryAPIAddr, p.Epoch = s.ha.name, s.cl.NodeAddr, s.cl.APIAddr, s.ha.epoch
	return p
}

func (s *Server) handlePing(w http.ResponseWriter) { writeJSON(w, s.ping()) }

// standbyHandler serves a standby's every address.
func (s *Server) standbyHandler() http.Handler {
	return s.withPing(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.ping()
		where := "no controller holds the lease yet"
		if p.Primary != "" {
			where = fmt.Sprintf("the primary is %s (node_addr %s", p.Primary, p.PrimaryAddr)
			if p.PrimaryAPIAddr != "" {
				where += ", api_addr " + p.PrimaryAPIAddr
			}
			where += ")"
		}
		w.Header().Set("Retry-After", "1")
		writeErr(w, api.Errorf(api.ErrUnavailable, "tidectld %s is a standby controller; %s", s.ha.name, where))
	}))
}

// prepareController does what every start of the controller does before
// the store opens, and returns the cluster key ("" over TLS).
func prepareController(cl *Cluster) (string, error) {
	if os.Getenv("GOGC") == "" {
		// The controller's heap is mostly long-lived job records; a lower
		// GC target keeps its memory near the live set (10,000 pending
		// jobs fit in well under 50 MiB) for a little more GC CPU.
		gcfloor.Start(gcTarget)
	}
	if err := os.MkdirAll(cl.StateDir, 0o700); err != nil {
		return "", fmt.Errorf("create state dir: %w", err)
	}
	// Over TLS nodes show certificates, never the cluster key: the key
	// file is not read (and need not exist).
	tlsOn, err := tlsWanted(cl)
	if err != nil || tlsOn {
		return "", err
	}
	return readKey(cl.KeyFile)
}

// RunHA runs the controller until ctx ends: as the primary while it
// holds the store's leader lease, as a standby while another
// controller does. onPrimary is called with each term's Server before
// it serves, and the function it returns after. A lost lease ends the
// term and the controller waits as a standby again; any other end of a
// term hands the lease over at once and returns.
func RunHA(ctx context.Context, cl *Cluster, log *slog.Logger, onPrimary func(*Server) (func(), error)) error {
	key, err := prepareController(cl)
	if err != nil {
		return err
	}
	st, err := openStore(cl)
	if err != nil {
		return err
	}
	defer st.Close()
	e := &elector{st: st, cl: cl, log: log, key: key, bid: accounting.LeaseBid{
		Holder: cl.HA.Name(), Addr: cl.NodeAddr, APIAddr: cl.APIAddr, TTL: cl.HA.LeaseTTL,
	}}
	if e.bid.StepKey, err = stepKeyFingerprint(cl); err != nil {
		return err
	}
	for {
		epoch, since, err := e.becomePrimary(ctx)
		if err != nil || ctx.Err() != nil {
			return err
		}
		lost, err := e.term(ctx, epoch, since, onPrimary)
		if !lost {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if rerr := st.ReleaseLease(rctx, epoch); rerr != nil {
				log.Warn("could not hand the lease over (standbys wait for it to lapse)", "err", rerr)
			}
			cancel()
			return err
		}
		log.Error("lost the leader lease: this controller stopped acting and waits as a standby", "epoch", epoch, "err", err)
	}
}

// stepKeyFingerprint is the fingerprint of the step key in state_dir
// (created at the first start), which the lease publishes: controllers
// that take turns must sign step grants with the same key.
func stepKeyFingerprint(cl *Cluster) (string, error) {
	dir, err := filepath.Abs(cl.StateDir)
	if err != nil {
		return "", fmt.Errorf("step key: %w", err)
	}
	key, _, err := stepcred.LoadOrCreateKey(filepath.Join(dir, StepKeyFile))
	if err != nil {
		return "", fmt.Errorf("%w (the controller's key for srun step grants; see docs/operations.md)", err)
	}
	return stepcred.Fingerprint(stepcred.NewSigner(key).Public()), nil
}

// elector takes, keeps and hands over the lease for one controller.
type elector struct {
	st  leaseStore
	cl  *Cluster
	log *slog.Logger
	key string
	bid accounting.LeaseBid
	// warnedKey notes the primary whose step key differs, logged once.
	warnedKey string
}

// pollEvery is how often a standby bids: a tenth of the TTL, at most a
// second, so that it takes over soon after the lease lapses.
func (e *elector) pollEvery() time.Duration {
	return min(max(e.bid.TTL/10, 50*time.Millisecond), time.Second)
}

// tryAcquire bids once for the lease: the lease as it stands after the
// bid, whether this controller won it, and when the bid was sent.
func (e *elector) tryAcquire(ctx context.Context) (accounting.Lease, bool, time.Time, error) {
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, e.bid.TTL/2)
	defer cancel()
	l, won, err := e.st.AcquireLease(actx, e.bid)
	if err == nil && !won && l.Live() && l.StepKey != "" && l.StepKey != e.bid.StepKey && e.warnedKey != l.Holder {
		e.warnedKey = l.Holder
		e.log.Error("the primary signs step grants with another step key: copy its state_dir/"+StepKeyFile+
			" here, or srun fails on every node after a failover to this controller",
			"primary", l.Holder, "primary_step_key", l.StepKey, "step_key", e.bid.StepKey)
	}
	return l, won, sent, err
}

// becomePrimary returns once this controller holds the lease (its
// epoch, and when the winning bid was sent), serving as a standby
// meanwhile. It returns 0 and no error when ctx ends first.
func (e *elector) becomePrimary(ctx context.Context) (uint64, time.Time, error) {
	l, won, sent, err := e.tryAcquire(ctx)
	if err == nil && won {
		return l.Epoch, sent, nil
	}
	if ctx.Err() != nil {
		return 0, time.Time{}, nil
	}
	sb, err := buildServer(e.cl, e.log, e.st, e.key, time.Now)
	if err != nil {
		return 0, time.Time{}, err
	}
	sb.ha.name = e.bid.Holder
	sb.ha.view.Store(&l)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- sb.serve(sctx, true) }()
	stopStandby := func() error {
		stop()
		return <-done
	}
	if err != nil {
		e.log.Warn("standby: cannot read the leader lease", "controller", e.bid.Holder, "err", err)
	} else {
		e.log.Info("standby: another controller holds the leader lease", "controller", e.bid.Holder, "primary", l.Holder, "epoch", l.Epoch)
	}
	tick := time.NewTicker(e.pollEvery())
	defer tick.Stop()
	primary := l.Holder
	for {
		select {
		case <-ctx.Done():
			return 0, time.Time{}, stopStandby()
		case err := <-done:
			return 0, time.Time{}, fmt.Errorf("standby: %w", err)
		case <-tick.C:
		}
		l, won, sent, err := e.tryAcquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("standby: cannot read the leader lease", "err", err)
			}
			continue
		}
		if won {
			if err := stopStandby(); err != nil {
				return 0, time.Time{}, fmt.Errorf("standby: %w", err)
			}
			e.log.Info("took the leader lease", "controller", e.bid.Holder, "epoch", l.Epoch, "previous", primary)
			return l.Epoch, sent, nil
		}
		sb.ha.view.Store(&l)
		if l.Holder != primary {
			e.log.Info("standby: the primary changed", "primary", l.Holder, "epoch", l.Epoch)
			primary = l.Holder
		}
	}
}

// term runs one term as primary at epoch, won by a bid sent at since.
// lost says whether it ended because the lease was lost (rather than
// by ctx or a failure, which err then says).
func (e *elector) term(ctx context.Context, epoch uint64, since time.Time, onPrimary func(*Server) (func(), error)) (lost bool, err error) {
	e.st.SetFence(epoch)
	tctx, end := context.WithCancel(ctx)
	defer end()
	var lostFlag atomic.Bool
	loseNow := func() {
		lostFlag.Store(true)
		end()
	}
	valid := &leaseValidity{}
	valid.set(since.Add(e.bid.TTL - leaseMargin(e.bid.TTL)))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.keep(tctx, epoch, valid, loseNow) }()
	defer wg.Wait()

	s, err := buildServer(e.cl, e.log, e.st, e.key, time.Now)
	if err != nil {
		return false, err
	}
	s.ha.name, s.ha.epoch, s.ha.valid = e.bid.Holder, epoch, valid
	s.ha.fenced = func() {
		e.log.Error("a write found the store fenced: another controller took the lease", "epoch", epoch)
		loseNow()
	}
	if err := s.recover(tctx); err != nil {
		return lostFlag.Load(), err
	}
	cleanup, err := onPrimary(s)
	if err != nil {
		return false, err
	}
	defer cleanup()
	err = s.Run(tctx)
	return lostFlag.Load(), err
}

// leaseMargin is how long before its lease could lapse in the store a
// primary stops: its own reaction (the deadline fires, the term's
// context ends, the listeners close) and clocks that run a little
// apart.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 5 }

// keep renews the lease held at epoch until ctx ends, moving valid on
// with each renewal (to when the renewal was sent, plus the TTL less
// the margin), and calls lose when the lease is lost: another
// controller holds it, or valid ran out with no renewal through.
func (e *elector) keep(ctx context.Context, epoch uint64, valid *leaseValidity, lose func()) {
	ttl := e.bid.TTL
	timer := time.NewTimer(valid.left())
	defer timer.Stop()
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	renew := func() (held bool, err error) {
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		defer cancel()
		held, err = e.st.RenewLease(rctx, epoch, ttl)
		if err == nil && held {
			valid.set(sent.Add(ttl - leaseMargin(ttl)))
			timer.Reset(valid.left())
		}
		return held, err
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			held, err := renew()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				e.log.Warn("leader lease renewal failed", "epoch", epoch, "err", err, "valid_for", valid.left().Round(time.Millisecond))
			case !held:
				e.log.Error("another controller took the leader lease", "epoch", epoch)
				lose()
				return
			}
		case <-timer.C:
			// Paused or cut off past the lease's validity: every request
			// is turned away meanwhile (withPing). The lease may still
			// be this controller's if no standby took it (a lone
			// controller after a long pause): one more renewal decides.
			// Whatever was tried meanwhile was fenced or is this
			// epoch's own.
			if held, err := renew(); err == nil && held {
				e.log.Warn("leader lease renewed late; still primary", "epoch", epoch)
				continue
			} else if err != nil && ctx.Err() == nil {
				e.log.Error("leader lease not renewed in time: stepping down", "epoch", epoch, "err", err)
			}
			lose()
			return
		}
	}
}

// errFenced reports whether err is a write refused by the fence.
func errFenced(err error) bool { return errors.Is(err, accounting.ErrFenced) }
