package ctld

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/ctld/sched"
)

// priorityList reads a priority listing answer.
func priorityList(t *testing.T, h *harness, uid uint32, query string) api.PriorityList {
	t.Helper()
	w := h.get(uid, api.PathPriority+query, "")
	if w.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", w.Code, w.Body)
	}
	var l api.PriorityList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// newPriorityHarness is newPrivateHarness with an hour of use charged
// (alice's jobs 1 and 2 in account ml, bob's 3 in phys) and two jobs
// that cannot start pending: alice's 4 and bob's 5, submitted half an
// hour apart.
func newPriorityHarness(t *testing.T, config string) *harness {
	t.Helper()
	h := newPrivateHarness(t, config)
	h.s.mu.Lock()
	for id, acct := range map[uint64]string{1: "ml", 2: "ml", 3: "phys"} {
		h.s.jobs[id].Account = acct
	}
	h.s.mu.Unlock()
	h.clock.add(time.Hour)
	h.s.schedulePass()
	for i, c := range []caller{h.alice, bob} {
		if i == 1 {
			h.clock.add(30 * time.Minute)
		}
		acct := []string{"ml", "phys"}[i]
		resp, err := h.submitAs(c, api.JobSpec{Name: "big", GPUs: 16, TimeLimit: int64(20 * 60 * (i + 1)), Account: acct})
		if err != nil {
			t.Fatal(err)
		}
		if resp.JobID != uint64(4+i) {
			t.Fatalf("job has id %d, want %d", resp.JobID, 4+i)
		}
	}
	h.clock.add(10 * time.Minute)
	h.s.schedulePass()
	return h
}

func TestPriorityListing(t *testing.T) {
	// A size reference above the jobs' 16 GPUs, so that their size
	// factor is not 0 and the listing has to carry it.
	h := newPriorityHarness(t, privateConfig("jobs")+"scheduler: {priority_job_size_ref: 32}\n")
	all := priorityList(t, h, uidRoot, "")
	if all.Policy != "tide" || all.Weights == nil || !all.Orders {
		t.Fatalf("policy %q weights %v orders %v; want tide's multifactor ordering the pass", all.Policy, all.Weights, all.Orders)
	}
	m := h.s.cl.Scheduler.Priority(h.s.cl.Policy)
	if w := all.Weights; w.Age != m.AgeWeight || w.Length != m.LengthWeight || w.JobSize != m.SizeWeight ||
		w.Fairshare != m.FairshareWeight || w.MaxAge != int64(m.MaxAge/time.Second) {
		t.Errorf("weights %+v, want those of %+v", *w, *m)
	}
	var ids []uint64
	for _, j := range all.Jobs {
		ids = append(ids, j.JobID)
	}
	if !slices.Equal(ids, []uint64{4, 5}) {
		t.Fatalf("root sees pending jobs %v, want [4 5]", ids)
	}
	var accts []string
	for _, a := range all.Accounts {
		accts = append(accts, a.Account)
	}
	if !slices.Equal(accts, []string{"ml", "phys"}) || all.Accounts[0].Usage <= all.Accounts[1].Usage {
		t.Fatalf("accounts %+v: want ml (2 GPUs for an hour) above phys (1)", all.Accounts)
	}

	// The factors are the pass's: by their definition, and in the
	// order the pass takes the jobs.
	for i, j := range all.Jobs {
		waited := []time.Duration{40 * time.Minute, 10 * time.Minute}[i]
		share := all.Accounts[i].Share
		want := map[string]float64{
			"age":       float64(waited) / float64(m.MaxAge),
			"length":    1 - math.Log(float64(20*(i+1)))/math.Log(m.LengthRef.Minutes()),
			"job size":  max(0, 1-15/float64(m.SizeRef-1)),
			"fairshare": math.Exp2(-share / 0.5),
		}
		got := map[string]float64{"age": j.Age, "length": j.Length, "job size": j.JobSize, "fairshare": j.Fairshare}
		if d := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); d != "" {
			t.Errorf("job %d factors (-want +got):\n%s", j.JobID, d)
		}
		prio := m.AgeWeight*j.Age + m.LengthWeight*j.Length + m.SizeWeight*j.JobSize + m.FairshareWeight*j.Fairshare
		if math.Abs(j.Priority-prio) > 1e-6 {
			t.Errorf("job %d priority %v, want %v", j.JobID, j.Priority, prio)
		}
	}
	h.s.mu.Lock()
	pending := []*api.Job{h.s.jobs[4], h.s.jobs[5]}
	snap := &sched.Snapshot{Usage: h.s.fair.u.Map()}
	sched.SortPending(pending, snap, all.Now, h.s.schedConfig())
	order := []uint64{pending[0].ID, pending[1].ID}
	h.s.mu.Unlock()
	byPrio := []uint64{4, 5}
	if all.Jobs[1].Priority > all.Jobs[0].Priority {
		byPrio = []uint64{5, 4}
	}
	if !slices.Equal(order, byPrio) {
		t.Errorf("the pass orders %v, the listed priorities %v", order, byPrio)
	}

	// private_data: jobs: a user sees their own pending jobs and the
	// usage of their own accounts.
	for _, tc := range []struct {
		uid   uint32
		jobs  []uint64
		accts []string
	}{{uidAlice, []uint64{4}, []string{"ml"}}, {uidBob, []uint64{5}, []string{"phys"}}, {uidCarol, []uint64{4, 5}, []string{"ml", "phys"}}} {
		l := priorityList(t, h, tc.uid, "")
		ids, accts := []uint64{}, []string{}
		for _, j := range l.Jobs {
			ids = append(ids, j.JobID)
		}
		for _, a := range l.Accounts {
			accts = append(accts, a.Account)
		}
		if !slices.Equal(ids, tc.jobs) || !slices.Equal(accts, tc.accts) {
			t.Errorf("uid %d sees jobs %v accounts %v; want %v %v", tc.uid, ids, accts, tc.jobs, tc.accts)
		}
	}
	// The job list's filters apply.
	if l := priorityList(t, h, uidRoot, "?user=bob"); len(l.Jobs) != 1 || l.Jobs[0].JobID != 5 {
		t.Errorf("user=bob: %+v", l.Jobs)
	}
}

func TestPriorityListingOpen(t *testing.T) {
	// Without private_data a user sees every pending job and account.
	h := newPriorityHarness(t, privateConfig(""))
	l := priorityList(t, h, uidAlice, "")
	if len(l.Jobs) != 2 || len(l.Accounts) != 2 {
		t.Errorf("alice sees %d jobs and %d accounts, want 2 and 2", len(l.Jobs), len(l.Accounts))
	}
}

func TestPriorityListingOtherPolicy(t *testing.T) {
	h := newPriorityHarness(t, privateConfig("")+"scheduler: {policy: backfill}\n")
	l := priorityList(t, h, uidRoot, "")
	if l.Policy != "backfill" || l.Weights != nil || len(l.Jobs) != 0 || l.Orders {
		t.Errorf("policy backfill: %+v; want no weights and no factors", l)
	}
}

// TestPriorityClient reads the listing through the Go client over the
// socket: the route, the filter's round trip and the answer's decoding.
func TestPriorityClient(t *testing.T) {
	sv := serve(t, "")
	a := sv.h.submit(api.JobSpec{Name: "a", GPUs: 1, TimeLimit: 600})
	b := sv.h.submit(api.JobSpec{Name: "b", GPUs: 2, TimeLimit: 3600})
	c := client.NewUnix(sv.socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Priority(ctx, api.JobFilter{IDs: []uint64{b}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Policy != "tide" || l.Weights == nil || len(l.Jobs) != 1 || l.Jobs[0].JobID != b {
		t.Fatalf("listing %+v; want job %d's factors under tide", l, b)
	}
	all, err := c.Priority(ctx, api.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Jobs) != 2 || all.Jobs[0].JobID != a || !(all.Jobs[0].Length > all.Jobs[1].Length) {
		t.Errorf("jobs %+v; want %d (10 minutes) with a higher length factor than %d (an hour)", all.Jobs, a, b)
	}
}

// TestPriorityListingMaxLimit: a one-GPU job at its partition's maximum
// limit is listed with the length of priority_max_limit_as, as the pass
// orders it; a minute shorter, or two GPUs, keeps its own.
func TestPriorityListingMaxLimit(t *testing.T) {
	h := newPriorityHarness(t, privateConfig("jobs"))
	m := h.s.cl.Scheduler.Priority(h.s.cl.Policy)
	const maxTime = 2 * 86400
	h.s.mu.Lock()
	for _, p := range h.s.partitions {
		p.MaxTime = maxTime
	}
	h.s.mu.Unlock()
	lengthOf := func(secs float64) float64 {
		return 1 - math.Log(secs/60)/math.Log(m.LengthRef.Minutes())
	}
	want := map[uint64]float64{}
	for _, tc := range []struct {
		gpus  int
		limit int64
		want  float64
	}{{1, maxTime, lengthOf(m.MaxLimitAs.Seconds())}, {1, maxTime - 60, lengthOf(maxTime - 60)}, {2, maxTime, lengthOf(maxTime)}} {
		resp, err := h.submitAs(h.alice, api.JobSpec{Name: "held", GPUs: tc.gpus, TimeLimit: tc.limit, Hold: true})
		if err != nil {
			t.Fatal(err)
		}
		want[resp.JobID] = tc.want
	}
	for _, j := range priorityList(t, h, uidRoot, "").Jobs {
		if w, ok := want[j.JobID]; ok {
			if math.Abs(j.Length-w) > 1e-9 {
				t.Errorf("job %d: length %v, want %v", j.JobID, j.Length, w)
			}
			delete(want, j.JobID)
		}
	}
	if len(want) > 0 {
		t.Errorf("jobs %v not listed", want)
	}
}
