package accounting

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestLeaseTakeTurns: the first bidder takes the lease, a second waits
// while it is live, takes it once it lapses or is released, and each
// change of holder raises the epoch; the holder's own bid (a restart)
// takes it at once.
func TestLeaseTakeTurns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		loc := be.newDB(t)
		a, b := be.open(t, loc), be.open(t, loc)
		ctx := context.Background()
		if l, err := a.CurrentLease(ctx); err != nil || l.Epoch != 0 || l.Live() {
			t.Fatalf("fresh store: lease %+v, %v; want none", l, err)
		}
		bidA := LeaseBid{Holder: "ctl-a", Addr: "a:6817", APIAddr: "a:6820", StepKey: "fpA", TTL: time.Minute}
		bidB := LeaseBid{Holder: "ctl-b", Addr: "b:6817", TTL: 300 * time.Millisecond}
		before := uint64(time.Now().UnixMilli())
		l, won, err := a.AcquireLease(ctx, bidA)
		if err != nil || !won || l.Holder != "ctl-a" || l.Addr != "a:6817" || l.APIAddr != "a:6820" || l.StepKey != "fpA" {
			t.Fatalf("first bid: %+v won=%v err=%v", l, won, err)
		}
		// The first epoch is the store's clock in milliseconds, so that
		// a replaced store's epochs start above the old one's.
		e0 := l.Epoch
		if e0+1000 < before || e0 > uint64(time.Now().UnixMilli())+1000 {
			t.Fatalf("first epoch %d, want the clock in milliseconds (about %d)", e0, before)
		}
		if l.Left <= 50*time.Second || l.Left > time.Minute {
			t.Errorf("lease left %v, want about a minute", l.Left)
		}
		if l, won, err := b.AcquireLease(ctx, bidB); err != nil || won || l.Holder != "ctl-a" || l.Epoch != e0 {
			t.Fatalf("second bid on a live lease: %+v won=%v err=%v; want refused, held by ctl-a", l, won, err)
		}
		// A restart of ctl-a takes its own lease at once, at a new epoch.
		l, won, err = a.AcquireLease(ctx, bidA)
		if err != nil || !won || l.Epoch != e0+1 {
			t.Fatalf("holder's own bid: %+v won=%v err=%v; want epoch e0+1", l, won, err)
		}
		if ok, err := a.RenewLease(ctx, e0, time.Minute); err != nil || ok {
			t.Fatalf("renew at the old epoch: %v %v; want refused", ok, err)
		}
		if ok, err := a.RenewLease(ctx, e0+1, time.Minute); err != nil || !ok {
			t.Fatalf("renew at epoch 2: %v %v", ok, err)
		}
		if err := a.ReleaseLease(ctx, e0+1); err != nil {
			t.Fatal(err)
		}
		l, won, err = b.AcquireLease(ctx, bidB)
		if err != nil || !won || l.Epoch != e0+2 || l.Holder != "ctl-b" {
			t.Fatalf("bid after release: %+v won=%v err=%v; want ctl-b at epoch e0+2", l, won, err)
		}
		// ctl-b does not renew: its lease lapses and ctl-a takes over.
		time.Sleep(400 * time.Millisecond)
		if l, err := a.CurrentLease(ctx); err != nil || l.Live() {
			t.Fatalf("lapsed lease reads %+v, %v; want not live", l, err)
		}
		l, won, err = a.AcquireLease(ctx, bidA)
		if err != nil || !won || l.Epoch != e0+3 {
			t.Fatalf("bid after lapse: %+v won=%v err=%v; want epoch e0+3", l, won, err)
		}
		if ok, err := b.RenewLease(ctx, e0+2, time.Minute); err != nil || ok {
			t.Fatalf("lapsed holder renews: %v %v; want refused", ok, err)
		}
	})
}

// TestLeaseOneWinner: bidders racing for a free lease: exactly one wins.
func TestLeaseOneWinner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		loc := be.newDB(t)
		const n = 4
		stores := make([]*Store, n)
		for i := range stores {
			stores[i] = be.open(t, loc)
		}
		var wg sync.WaitGroup
		wins := make([]bool, n)
		errs := make([]error, n)
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, wins[i], errs[i] = stores[i].AcquireLease(context.Background(), LeaseBid{Holder: string(rune('a' + i)), TTL: time.Minute})
			}()
		}
		wg.Wait()
		won := 0
		for i := range wins {
			if errs[i] != nil {
				t.Errorf("bidder %d: %v", i, errs[i])
			}
			if wins[i] {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("%d bidders won, want 1", won)
		}
	})
}

// TestFencedWrite: once another controller takes the lease, every write
// of the old holder fails with ErrFenced and changes nothing, while the
// new holder's writes commit.
func TestFencedWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		loc := be.newDB(t)
		old, cur := be.open(t, loc), be.open(t, loc)
		ctx := context.Background()
		l, won, err := old.AcquireLease(ctx, LeaseBid{Holder: "old", TTL: 200 * time.Millisecond})
		if err != nil || !won {
			t.Fatalf("acquire: %v %v", won, err)
		}
		old.SetFence(l.Epoch)
		mustWrite(t, old, &Batch{Jobs: []*api.Job{makeJob(1).obj()}})
		time.Sleep(300 * time.Millisecond)
		l2, won, err := cur.AcquireLease(ctx, LeaseBid{Holder: "new", TTL: time.Minute})
		if err != nil || !won {
			t.Fatalf("takeover: %v %v", won, err)
		}
		cur.SetFence(l2.Epoch)
		err = old.Write(ctx, &Batch{Jobs: []*api.Job{makeJob(2).obj()}})
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("old holder's write after takeover: %v; want ErrFenced", err)
		}
		mustWrite(t, cur, &Batch{Jobs: []*api.Job{makeJob(3).obj()}})
		jobs, err := cur.LoadJobs(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
			t.Fatalf("stored jobs %v, want [1 3] (the fenced write must not land)", ids)
		}
		// A store without a fence (tools, tests) writes as before.
		old.SetFence(0)
		mustWrite(t, old, &Batch{Jobs: []*api.Job{makeJob(4).obj()}})
	})
}

// TestTakeoverPastStuckWriter: a primary stopped in the middle of a write
// transaction holds the lease row's share lock; PostgreSQL ends its idle
// transaction after writeIdleTimeout, and a standby takes over then
// instead of waiting for as long as the pause lasts.
func TestTakeoverPastStuckWriter(t *testing.T) {
	be := backends[1]
	loc := be.newDB(t)
	old, cur := be.open(t, loc), be.open(t, loc)
	ctx := context.Background()
	l, won, err := old.AcquireLease(ctx, LeaseBid{Holder: "old", TTL: 300 * time.Millisecond})
	if err != nil || !won {
		t.Fatalf("acquire: %v %v", won, err)
	}
	// The old primary's writer, stopped after its fence check.
	tx, err := old.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var e int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM leases WHERE name = 'primary' FOR SHARE`).Scan(&e); err != nil || uint64(e) != l.Epoch {
		t.Fatalf("fence read: %d %v", e, err)
	}
	time.Sleep(400 * time.Millisecond) // the lease lapses
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	t0 := time.Now()
	l2, won, err := cur.AcquireLease(actx, LeaseBid{Holder: "new", TTL: time.Minute})
	if err != nil || !won || l2.Epoch != l.Epoch+1 {
		t.Fatalf("takeover past the stuck writer: %+v %v %v", l2, won, err)
	}
	if waited := time.Since(t0); waited > writeIdleTimeout+5*time.Second {
		t.Errorf("takeover waited %v", waited)
	}
	if err := tx.Commit(); err == nil {
		t.Errorf("the stuck writer's transaction committed after the takeover")
	}
}

// TestReplacedStoreEpochsGoOn: a store that replaces another (a fresh
// state directory, a new database) while node daemons keep running
// starts its epochs above the old store's, even after takeovers there,
// so that the nodes, which refuse answers of a lower epoch than they
// saw, follow the new controller without a restart.
func TestReplacedStoreEpochsGoOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		old := be.open(t, be.newDB(t))
		var last uint64
		for _, holder := range []string{"ctl-a", "ctl-b", "ctl-a", "ctl-b"} {
			l, won, err := old.AcquireLease(ctx, LeaseBid{Holder: holder, TTL: time.Minute})
			if err == nil && !won {
				if err = old.ReleaseLease(ctx, l.Epoch); err == nil {
					l, won, err = old.AcquireLease(ctx, LeaseBid{Holder: holder, TTL: time.Minute})
				}
			}
			if err != nil || !won {
				t.Fatalf("%s's bid on the old store: %+v won=%v err=%v", holder, l, won, err)
			}
			last = l.Epoch
		}
		time.Sleep(20 * time.Millisecond)
		fresh := be.open(t, be.newDB(t))
		l, won, err := fresh.AcquireLease(ctx, LeaseBid{Holder: "ctl-a", TTL: time.Minute})
		if err != nil || !won {
			t.Fatalf("first bid on the new store: %+v won=%v err=%v", l, won, err)
		}
		if l.Epoch <= last {
			t.Errorf("the new store's first epoch %d is not above the old store's last %d", l.Epoch, last)
		}
	})
}
