// Package clitest provides a fake controller API and a factory for
// command tests.
package clitest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// FakeAPI is an in-memory cmdutil.API. JobRecs, Finished (accounting-only
// jobs), NodeRecs, Partitions and Trail are served as given; filters are
// applied with api.JobFilter.Match. Calls are recorded.
type FakeAPI struct {
	mu         sync.Mutex
	Now        time.Time
	JobRecs    []api.Job
	Finished   []api.Job
	NodeRecs   []api.Node
	Partitions []api.Partition
	Trail      map[uint64][]api.Event
	AuditLog   []api.AuditRecord
	Info       api.ClusterInfo

	// Err, when set, is returned by every call.
	Err error
	// SubmitResp answers Submit; NextID is used when SubmitResp.JobID is 0
	// and the request is not TestOnly.
	SubmitResp api.SubmitResponse
	NextID     uint64

	Submitted   []api.SubmitRequest
	Cancels     []api.CancelRequest
	JobUpdates  []api.JobUpdate
	NodeUpdates []api.NodeUpdate
	// CancelResp and UpdateResp answer Cancel and UpdateJobs when set;
	// otherwise every selected job succeeds.
	CancelResp *api.CancelResponse
	UpdateResp *api.CancelResponse

	// Sharing answers Queues; QueuesErr, when set, is Queues' error.
	Sharing   api.QueueList
	QueuesErr error
	// Checkpoints records acknowledged job ids; CheckpointErr, when set,
	// is Checkpoint's error (an unreachable controller, say).
	Checkpoints   []uint64
	CheckpointErr error
	// Throttled, when set, makes Submit behave as the real client does
	// behind a full submission buffer: it tells the OnThrottle hook once
	// and then succeeds.
	Throttled  *client.Throttle
	onThrottle func(client.Throttle)
}

var (
	_ cmdutil.API       = (*FakeAPI)(nil)
	_ cmdutil.Throttler = (*FakeAPI)(nil)
)

// OnThrottle sets the hook Submit tells when Throttled is set.
func (f *FakeAPI) OnThrottle(h func(client.Throttle)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onThrottle = h
}

// Queues returns Sharing.
func (f *FakeAPI) Queues(_ context.Context) (api.QueueList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.QueueList{}, f.Err
	}
	if f.QueuesErr != nil {
		return api.QueueList{}, f.QueuesErr
	}
	return f.Sharing, nil
}

// Checkpoint records the job id; a job it does not hold is not found.
func (f *FakeAPI) Checkpoint(_ context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if f.CheckpointErr != nil {
		return f.CheckpointErr
	}
	for _, j := range f.JobRecs {
		if j.ID == id {
			f.Checkpoints = append(f.Checkpoints, id)
			return nil
		}
	}
	return api.Errorf(api.ErrNotFound, "Invalid job id specified")
}

// Submit records the request.
func (f *FakeAPI) Submit(_ context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.SubmitResponse{}, f.Err
	}
	if f.Throttled != nil && f.onThrottle != nil {
		f.onThrottle(*f.Throttled)
	}
	f.Submitted = append(f.Submitted, req)
	r := f.SubmitResp
	if r.JobID == 0 && !req.TestOnly {
		f.NextID++
		r.JobID = f.NextID
	}
	return r, nil
}

func (f *FakeAPI) match(src []api.Job, flt api.JobFilter) []api.Job {
	var out []api.Job
	for i := range src {
		if flt.Match(&src[i]) {
			out = append(out, src[i])
		}
	}
	return out
}

// Jobs filters JobRecs.
func (f *FakeAPI) Jobs(_ context.Context, flt api.JobFilter) (api.JobList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.JobList{}, f.Err
	}
	return api.JobList{Jobs: f.match(f.JobRecs, flt), Now: f.Now}, nil
}

// Job finds one job in JobRecs or Finished.
func (f *FakeAPI) Job(_ context.Context, id uint64) (api.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.Job{}, f.Err
	}
	for _, src := range [][]api.Job{f.JobRecs, f.Finished} {
		for _, j := range src {
			if j.ID == id {
				return j, nil
			}
		}
	}
	return api.Job{}, api.Errorf(api.ErrNotFound, "Invalid job id specified")
}

// Accounting filters JobRecs and Finished together, by id.
func (f *FakeAPI) Accounting(_ context.Context, flt api.JobFilter) (api.JobList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.JobList{}, f.Err
	}
	all := append(append([]api.Job{}, f.Finished...), f.JobRecs...)
	out := f.match(all, flt)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return api.JobList{Jobs: out, Now: f.Now}, nil
}

// Cancel records the request.
func (f *FakeAPI) Cancel(_ context.Context, req api.CancelRequest) (api.CancelResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.CancelResponse{}, f.Err
	}
	f.Cancels = append(f.Cancels, req)
	if f.CancelResp != nil {
		return *f.CancelResp, nil
	}
	var r api.CancelResponse
	for _, j := range f.match(f.JobRecs, req.Filter) {
		r.Results = append(r.Results, api.JobResult{JobID: j.ID})
	}
	return r, nil
}

// UpdateJobs records the request.
func (f *FakeAPI) UpdateJobs(_ context.Context, u api.JobUpdate) (api.CancelResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.CancelResponse{}, f.Err
	}
	f.JobUpdates = append(f.JobUpdates, u)
	if f.UpdateResp != nil {
		return *f.UpdateResp, nil
	}
	var r api.CancelResponse
	for _, id := range u.IDs {
		r.Results = append(r.Results, api.JobResult{JobID: id})
	}
	return r, nil
}

// Events returns Trail[id].
func (f *FakeAPI) Events(_ context.Context, id uint64) ([]api.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	ev, ok := f.Trail[id]
	if !ok {
		return nil, api.Errorf(api.ErrNotFound, "Invalid job id specified")
	}
	return ev, nil
}

// Audit returns the first limit records of AuditLog.
func (f *FakeAPI) Audit(_ context.Context, limit int) ([]api.AuditRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	if limit > 0 && limit < len(f.AuditLog) {
		return f.AuditLog[:limit], nil
	}
	return f.AuditLog, nil
}

// Nodes returns NodeRecs and Partitions.
func (f *FakeAPI) Nodes(_ context.Context) (api.NodeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.NodeList{}, f.Err
	}
	return api.NodeList{Nodes: f.NodeRecs, Partitions: f.Partitions, Now: f.Now}, nil
}

// UpdateNodes records the request.
func (f *FakeAPI) UpdateNodes(_ context.Context, u api.NodeUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	f.NodeUpdates = append(f.NodeUpdates, u)
	return nil
}

// Cluster returns Info with Now and Partitions filled in.
func (f *FakeAPI) Cluster(_ context.Context) (api.ClusterInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return api.ClusterInfo{}, f.Err
	}
	info := f.Info
	info.Now = f.Now
	if info.Partitions == nil {
		info.Partitions = f.Partitions
	}
	return info, nil
}

// Factory returns a factory whose API is fake, with a fixed clock and
// environment, plus the output buffers.
func Factory(fake *FakeAPI, env map[string]string) (*cmdutil.Factory, *Buffers) {
	ios, in, out, errb := cmdutil.Test()
	f := &cmdutil.Factory{
		IO:  ios,
		API: func() (cmdutil.API, error) { return fake, nil },
		Now: func() time.Time { return fake.Now },
		Getenv: func(k string) string {
			return env[k]
		},
		Environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			sort.Strings(out)
			return out
		},
		Getwd:    func() (string, error) { return "/home/alice/exp", nil },
		Hostname: func() (string, error) { return "login1", nil },
		UID:      func() int { return 1000 },
	}
	return f, &Buffers{In: in, Out: out, Err: errb}
}
