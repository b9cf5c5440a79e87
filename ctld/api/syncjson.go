package api

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/jsonfast"
)

// The node protocol is two exchanges per job: a sync that carries the
// node's job reports and an answer that carries launches, each as JSON
// over HTTP. In a storm of small jobs encoding/json's reflection over
// them was a visible share of both daemons' CPU (decoding the answer,
// mostly a launch's environment, about a tenth of tided's), so both
// documents are written and read by hand here, the way submissions are
// (submitjson.go, submitdecode.go): the writers produce json.Marshal's
// bytes exactly, and the readers take what the writers produce and hand
// anything else to encoding/json from the start, for its exact result
// and error.
//
// Any change to NodeSyncRequest, NodeSyncResponse or the types they hold
// (NodeJobReport, ExitStatus, gres.Status, LaunchSpec, NodeAlloc, ...)
// must be mirrored here; TestNodeSyncJSONMatchesEncodingJSON fills every
// field and fails until it is.

// DecodeNodeSyncRequest decodes data into r exactly as a json.Decoder
// with DisallowUnknownFields decodes its first value (what the
// controller asks of a request body), r being zero.
//
// The heartbeat's usual fields are read by hand; the GPU status and the
// GPU processes' jobs, sent every few seconds rather than on every sync,
// are decoded by encoding/json, each on its own. A repeated job list
// (which encoding/json merges element by element into the first) goes to
// encoding/json entirely.
func DecodeNodeSyncRequest(data []byte, r *NodeSyncRequest) error {
	return jsonfast.Decode(data, r, jsonfast.StreamStrict, func(d *jsonfast.Decoder, out *NodeSyncRequest) bool {
		return syncDecoder{d}.syncRequest(out)
	})
}

// DecodeNodeSyncResponse decodes data into r exactly as the node
// daemon's client decoded the controller's answer before: a json.Decoder
// (unknown fields allowed, so that an older node takes a newer
// controller's answer) decoding its first value, r being zero.
//
// An unknown field, allowed as it is, still sends the whole answer to
// encoding/json: the hand reader cannot tell it from a known field
// spelled in another case, which encoding/json accepts.
func DecodeNodeSyncResponse(data []byte, r *NodeSyncResponse) error {
	return jsonfast.Decode(data, r, jsonfast.Stream, func(d *jsonfast.Decoder, out *NodeSyncResponse) bool {
		return syncDecoder{d}.syncResponse(out)
	})
}

// syncDecoder reads the node protocol's documents field by field, by
// the JSON names AppendJSON writes.
type syncDecoder struct{ *jsonfast.Decoder }

// structs reads an array of objects into a fresh slice, elem reading
// each one. A key met twice would merge the second array into the
// first's elements in encoding/json, so once is the most it accepts.
func structs[T any](d syncDecoder, seen *bool, dst *[]T, elem func(*T) bool) bool {
	if *seen {
		return false
	}
	*seen = true
	out := []T{}
	if !d.Array(func() bool {
		out = append(out, *new(T))
		return elem(&out[len(out)-1])
	}) {
		return false
	}
	*dst = out
	return true
}

func (d syncDecoder) syncRequest(r *NodeSyncRequest) bool {
	var jobs, usage bool
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return d.String(&r.Name)
		case "jobs":
			return structs(d, &jobs, &r.Jobs, d.jobReport)
		case "wait_ms":
			return d.Int(&r.WaitMS)
		case "seq":
			return d.Uint64(&r.Seq)
		case "gpu_status":
			return d.Value(&r.GPUStatus, true)
		case "cpu_load":
			return d.Float64(&r.CPULoad)
		case "free_mem_mb":
			return d.Int64(&r.FreeMemMB)
		case "gpu_proc_jobs":
			return d.Value(&r.GPUProcJobs, true)
		case "hosted_gen":
			return d.Uint64(&r.HostedGen)
		case "usage":
			return structs(d, &usage, &r.Usage, func(u *NodeUsage) bool { return DecodeNodeUsageJSON(d.Decoder, u) })
		}
		return false
	})
}

func (d syncDecoder) jobReport(j *NodeJobReport) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "job_id":
			return d.Uint64(&j.JobID)
		case "restart":
			return d.Int(&j.Restart)
		case "state":
			var s string
			ok := d.String(&s)
			j.State = NodeJobState(s)
			return ok
		case "start_time":
			return d.Time(&j.StartTime)
		case "end_time":
			return d.Time(&j.EndTime)
		case "exit":
			// Into the status already there, as encoding/json merges a
			// repeated key's object into the first.
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "code":
					return d.Int(&j.Exit.Code)
				case "signal":
					return d.Int(&j.Exit.Signal)
				}
				return false
			})
		case "timed_out":
			return d.Bool(&j.TimedOut)
		case "killed":
			return d.Bool(&j.Killed)
		case "error":
			return d.String(&j.Error)
		case "oom":
			return d.Bool(&j.OOM)
		case "checkpoint_ack":
			return d.Bool(&j.CheckpointAck)
		case "launch_failed":
			return d.Bool(&j.LaunchFailed)
		case "usage":
			if j.Usage != nil {
				return false // repeated: encoding/json merges
			}
			j.Usage = &NodeUsage{}
			return DecodeNodeUsageJSON(d.Decoder, j.Usage)
		}
		return false
	})
}

func (d syncDecoder) syncResponse(r *NodeSyncResponse) bool {
	var launch, signals, limits, ack, forget, hosted bool
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "launch":
			return structs(d, &launch, &r.Launch, d.launchSpec)
		case "signals":
			return structs(d, &signals, &r.Signals, d.signalCommand)
		case "limits":
			return structs(d, &limits, &r.Limits, d.limitUpdate)
		case "ack":
			return structs(d, &ack, &r.Ack, d.jobRef)
		case "forget":
			return structs(d, &forget, &r.Forget, d.jobRef)
		case "unregistered":
			return d.Bool(&r.Unregistered)
		case "step_key":
			return d.String(&r.StepKey)
		case "hosted":
			return structs(d, &hosted, &r.Hosted, d.hostedJob)
		case "hosted_gen":
			return d.Uint64(&r.HostedGen)
		}
		return false
	})
}

func (d syncDecoder) hostedJob(h *HostedJob) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "user_id":
			return d.Uint32(&h.UserID)
		case "group_id":
			return d.Uint32(&h.GroupID)
		}
		return d.jobRefField(key, &h.JobRef)
	})
}

// jobRefField reads JobRef's fields, which the types that embed it
// share.
func (d syncDecoder) jobRefField(key []byte, j *JobRef) bool {
	switch string(key) {
	case "job_id":
		return d.Uint64(&j.JobID)
	case "restart":
		return d.Int(&j.Restart)
	}
	return false
}

func (d syncDecoder) jobRef(j *JobRef) bool {
	return d.Object(func(key []byte) bool { return d.jobRefField(key, j) })
}

func (d syncDecoder) signalCommand(c *SignalCommand) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "signal":
			return d.Int(&c.Signal)
		case "kill":
			return d.Bool(&c.Kill)
		case "batch_only":
			return d.Bool(&c.BatchOnly)
		case "steps":
			return d.Bool(&c.Steps)
		case "step_ids":
			return d.Uint32s(&c.StepIDs)
		}
		return d.jobRefField(key, &c.JobRef)
	})
}

func (d syncDecoder) limitUpdate(u *LimitUpdate) bool {
	return d.Object(func(key []byte) bool {
		if string(key) == "time_limit" {
			return d.Int64(&u.TimeLimit)
		}
		return d.jobRefField(key, &u.JobRef)
	})
}

func (d syncDecoder) launchSpec(s *LaunchSpec) bool {
	var alloc bool
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return d.String(&s.Name)
		case "user_id":
			return d.Uint32(&s.UserID)
		case "group_id":
			return d.Uint32(&s.GroupID)
		case "user":
			return d.String(&s.User)
		case "partition":
			return d.String(&s.Partition)
		case "account":
			return d.String(&s.Account)
		case "cluster":
			return d.String(&s.Cluster)
		case "script":
			return d.String(&s.Script)
		case "args":
			return d.Strings(&s.Args)
		case "work_dir":
			return d.String(&s.WorkDir)
		case "submit_dir":
			return d.String(&s.SubmitDir)
		case "submit_host":
			return d.String(&s.SubmitHost)
		case "env":
			return d.Strings(&s.Env)
		case "stdout":
			return d.String(&s.Stdout)
		case "stderr":
			return d.String(&s.Stderr)
		case "stdin":
			return d.String(&s.Stdin)
		case "open_mode":
			return d.String(&s.OpenMode)
		case "time_limit":
			return d.Int64(&s.TimeLimit)
		case "start_time":
			return d.Time(&s.StartTime)
		case "kill_wait":
			return d.Int64(&s.KillWait)
		case "signal":
			// Into the spec already there, as encoding/json merges a
			// repeated key's object into the first.
			if s.Signal == nil {
				s.Signal = new(SignalSpec)
			}
			return d.signalSpec(s.Signal)
		case "alloc":
			// Not omitted when empty: a nil one is written as null,
			// which encoding/json reads as nil.
			if d.Null() {
				s.Alloc = nil
				return true
			}
			return structs(d, &alloc, &s.Alloc, d.nodeAlloc)
		case "num_tasks":
			return d.Int(&s.NumTasks)
		case "cpus_per_task":
			return d.Int(&s.CPUsPerTask)
		case "gpu_uuids":
			return d.Strings(&s.GPUUUIDs)
		case "array":
			if s.Array == nil {
				s.Array = new(ArrayLaunch)
			}
			return d.arrayLaunch(s.Array)
		case "container_image":
			return d.String(&s.ContainerImage)
		case "container_mounts":
			return d.Value(&s.ContainerMounts, false)
		case "qos":
			return d.String(&s.QOS)
		case "request":
			return d.Value(&s.Request, false)
		case "topo_addr":
			return d.String(&s.TopoAddr)
		case "topo_pattern":
			return d.String(&s.TopoPattern)
		}
		return d.jobRefField(key, &s.JobRef)
	})
}

func (d syncDecoder) signalSpec(s *SignalSpec) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "signal":
			return d.Int(&s.Signal)
		case "seconds":
			return d.Int(&s.Seconds)
		case "batch_only":
			return d.Bool(&s.BatchOnly)
		}
		return false
	})
}

func (d syncDecoder) nodeAlloc(a *NodeAlloc) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "node":
			return d.String(&a.Node)
		case "cpus":
			return d.Int(&a.CPUs)
		case "memory_mb":
			return d.Int64(&a.MemoryMB)
		case "gpus":
			return d.Ints(&a.GPUs)
		case "gpu_mem_mb":
			return d.Int64(&a.GPUMemMB)
		case "gpu_compute_pct":
			return d.Int(&a.GPUComputePct)
		case "tasks":
			return d.Int(&a.Tasks)
		case "numa":
			return d.Ints(&a.NUMA)
		}
		return false
	})
}

func (d syncDecoder) arrayLaunch(a *ArrayLaunch) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "job_id":
			return d.Uint64(&a.JobID)
		case "task":
			return d.Int(&a.Task)
		case "count":
			return d.Int(&a.Count)
		case "min":
			return d.Int(&a.Min)
		case "max":
			return d.Int(&a.Max)
		case "step":
			return d.Int(&a.Step)
		}
		return false
	})
}

// AppendJSON appends to b the bytes json.Marshal(r) produces and returns
// the extended slice; the node daemon sends it on every heartbeat. It
// fails exactly where json.Marshal does: a report's time that RFC 3339
// cannot spell (see SubmitRequest.AppendJSON) or a CPU load that is NaN
// or infinite. It then returns b at its original length and
// json.Marshal's error.
func (r *NodeSyncRequest) AppendJSON(b []byte) ([]byte, error) {
	if r == nil {
		return append(b, "null"...), nil
	}
	n0 := len(b)
	b = slices.Grow(b, 128+len(r.Name)+160*len(r.Jobs))
	b = append(b, `{"name":`...)
	b = appendJSONString(b, r.Name)
	if len(r.Jobs) > 0 {
		b = append(b, `,"jobs":[`...)
		for i := range r.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJobReportJSON(b, &r.Jobs[i]); err != nil {
				return b[:n0], err
			}
		}
		b = append(b, ']')
	}
	b = appendIntField(b, `,"wait_ms":`, int64(r.WaitMS))
	if r.Seq != 0 {
		b = strconv.AppendUint(append(b, `,"seq":`...), r.Seq, 10)
	}
	if len(r.GPUStatus) > 0 {
		b = append(b, `,"gpu_status":[`...)
		for i := range r.GPUStatus {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGPUStatusJSON(b, &r.GPUStatus[i])
		}
		b = append(b, ']')
	}
	if r.CPULoad != 0 {
		if math.IsNaN(r.CPULoad) || math.IsInf(r.CPULoad, 0) {
			// Rare enough to let json.Marshal build its error.
			_, err := json.Marshal(r)
			return b[:n0], err
		}
		b = appendJSONFloat(append(b, `,"cpu_load":`...), r.CPULoad)
	}
	b = appendIntField(b, `,"free_mem_mb":`, r.FreeMemMB)
	if len(r.GPUProcJobs) > 0 {
		b = appendProcJobsJSON(append(b, `,"gpu_proc_jobs":`...), r.GPUProcJobs)
	}
	if r.HostedGen != 0 {
		b = strconv.AppendUint(append(b, `,"hosted_gen":`...), r.HostedGen, 10)
	}
	if len(r.Usage) > 0 {
		b = append(b, `,"usage":[`...)
		for i := range r.Usage {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.Usage[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func appendJobReportJSON(b []byte, j *NodeJobReport) ([]byte, error) {
	b = append(b, `{"job_id":`...)
	b = strconv.AppendUint(b, j.JobID, 10)
	b = append(b, `,"restart":`...)
	b = strconv.AppendInt(b, int64(j.Restart), 10)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(j.State))
	var err error
	if !j.StartTime.IsZero() {
		if b, err = appendJSONTime(append(b, `,"start_time":`...), j.StartTime); err != nil {
			return b, err
		}
	}
	if !j.EndTime.IsZero() {
		if b, err = appendJSONTime(append(b, `,"end_time":`...), j.EndTime); err != nil {
			return b, err
		}
	}
	b = append(b, `,"exit":{"code":`...)
	b = strconv.AppendInt(b, int64(j.Exit.Code), 10)
	b = append(b, `,"signal":`...)
	b = strconv.AppendInt(b, int64(j.Exit.Signal), 10)
	b = append(b, '}')
	b = appendBoolField(b, `,"timed_out":true`, j.TimedOut)
	b = appendBoolField(b, `,"killed":true`, j.Killed)
	b = appendStringField(b, `,"error":`, j.Error)
	b = appendBoolField(b, `,"oom":true`, j.OOM)
	b = appendBoolField(b, `,"checkpoint_ack":true`, j.CheckpointAck)
	b = appendBoolField(b, `,"launch_failed":true`, j.LaunchFailed)
	if j.Usage != nil {
		b = j.Usage.AppendJSON(append(b, `,"usage":`...))
	}
	return append(b, '}'), nil
}

// appendJobRefJSON opens an object with JobRef's fields, which come
// first in the types that embed it; the caller closes it.
func appendJobRefJSON(b []byte, j *JobRef) []byte {
	b = append(b, `{"job_id":`...)
	b = strconv.AppendUint(b, j.JobID, 10)
	b = append(b, `,"restart":`...)
	return strconv.AppendInt(b, int64(j.Restart), 10)
}

func appendGPUStatusJSON(b []byte, s *gres.Status) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(s.Index), 10)
	b = append(b, `,"health":`...)
	b = appendJSONString(b, s.Health)
	b = appendStringField(b, `,"reason":`, s.Reason)
	b = append(b, `,"mem_used_mb":`...)
	b = strconv.AppendInt(b, s.MemUsedMB, 10)
	b = append(b, `,"util_pct":`...)
	b = strconv.AppendInt(b, int64(s.UtilPct), 10)
	if len(s.Processes) > 0 {
		b = append(b, `,"processes":[`...)
		for i, p := range s.Processes {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendInt(b, int64(p.PID), 10)
			b = append(b, `,"mem_mb":`...)
			b = strconv.AppendInt(b, p.MemMB, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONFloat writes a finite f as encoding/json does: the shortest
// decimal that reads back as f, in exponent form only below 1e-6 or from
// 1e21 up, with an exponent of one digit not padded to two.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendProcJobsJSON writes the map with its keys in the order
// encoding/json sorts them: as decimal strings, so 10 comes before 9.
func appendProcJobsJSON(b []byte, m map[int]uint64) []byte {
	type entry struct {
		key string
		val uint64
	}
	es := make([]entry, 0, len(m))
	for k, v := range m {
		es = append(es, entry{strconv.Itoa(k), v})
	}
	slices.SortFunc(es, func(x, y entry) int { return cmp.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, e.key...)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, e.val, 10)
	}
	return append(b, '}')
}

// AppendJSON appends to b the bytes json.Marshal(r) produces and returns
// the extended slice; the controller answers every sync with it. It
// fails exactly where json.Marshal does, on a launch's start time that
// RFC 3339 cannot spell, and then returns b at its original length and
// json.Marshal's error.
func (r *NodeSyncResponse) AppendJSON(b []byte) ([]byte, error) {
	if r == nil {
		return append(b, "null"...), nil
	}
	n0 := len(b)
	b = slices.Grow(b, syncResponseSizeHint(r))
	// Every field may be omitted, so each is written after a comma and
	// the first comma becomes the opening brace.
	if len(r.Launch) > 0 {
		b = append(b, `,"launch":[`...)
		for i := range r.Launch {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendLaunchSpecJSON(b, &r.Launch[i]); err != nil {
				return b[:n0], err
			}
		}
		b = append(b, ']')
	}
	if len(r.Signals) > 0 {
		b = append(b, `,"signals":[`...)
		for i := range r.Signals {
			if i > 0 {
				b = append(b, ',')
			}
			c := &r.Signals[i]
			b = appendJobRefJSON(b, &c.JobRef)
			b = appendIntField(b, `,"signal":`, int64(c.Signal))
			b = appendBoolField(b, `,"kill":true`, c.Kill)
			b = appendBoolField(b, `,"batch_only":true`, c.BatchOnly)
			b = appendBoolField(b, `,"steps":true`, c.Steps)
			if len(c.StepIDs) > 0 {
				b = append(b, `,"step_ids":[`...)
				for i, id := range c.StepIDs {
					if i > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendUint(b, uint64(id), 10)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(r.Limits) > 0 {
		b = append(b, `,"limits":[`...)
		for i := range r.Limits {
			if i > 0 {
				b = append(b, ',')
			}
			u := &r.Limits[i]
			b = appendJobRefJSON(b, &u.JobRef)
			b = append(b, `,"time_limit":`...)
			b = strconv.AppendInt(b, u.TimeLimit, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendJobRefsField(b, `,"ack":[`, r.Ack)
	b = appendJobRefsField(b, `,"forget":[`, r.Forget)
	b = appendBoolField(b, `,"unregistered":true`, r.Unregistered)
	b = appendStringField(b, `,"step_key":`, r.StepKey)
	if len(r.Hosted) > 0 {
		b = append(b, `,"hosted":[`...)
		for i := range r.Hosted {
			if i > 0 {
				b = append(b, ',')
			}
			h := &r.Hosted[i]
			b = appendJobRefJSON(b, &h.JobRef)
			b = append(b, `,"user_id":`...)
			b = strconv.AppendUint(b, uint64(h.UserID), 10)
			b = append(b, `,"group_id":`...)
			b = strconv.AppendUint(b, uint64(h.GroupID), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.HostedGen != 0 {
		b = strconv.AppendUint(append(b, `,"hosted_gen":`...), r.HostedGen, 10)
	}
	if len(b) == n0 {
		return append(b, "{}"...), nil
	}
	b[n0] = '{'
	return append(b, '}'), nil
}

// syncResponseSizeHint guesses the encoded size of r from the launches'
// bulkiest fields, the script and the environment.
func syncResponseSizeHint(r *NodeSyncResponse) int {
	n := 64 + 32*(len(r.Signals)+len(r.Limits)+len(r.Ack)+len(r.Forget)) + 64*len(r.Hosted) + len(r.StepKey)
	for i := range r.Launch {
		s := &r.Launch[i]
		n += 640 + len(s.Script) + len(s.WorkDir) + len(s.SubmitDir)
		for _, e := range s.Env {
			n += len(e) + 3
		}
	}
	return n + n/16
}

// appendJobRefsField writes an omitempty []JobRef; key ends with the
// opening bracket.
func appendJobRefsField(b []byte, key string, refs []JobRef) []byte {
	if len(refs) == 0 {
		return b
	}
	b = append(b, key...)
	for i := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJobRefJSON(b, &refs[i]), '}')
	}
	return append(b, ']')
}

// appendLaunchSpecJSON writes s in LaunchSpec's declaration order, the
// embedded JobRef's fields first.
// AppendJSON appends s as json.Marshal writes it. tided keeps each
// launch in its job directory (launch.json), one per job.
func (s *LaunchSpec) AppendJSON(b []byte) ([]byte, error) {
	n0 := len(b)
	out, err := appendLaunchSpecJSON(b, s)
	if err != nil {
		return b[:n0], err
	}
	return out, nil
}

func appendLaunchSpecJSON(b []byte, s *LaunchSpec) ([]byte, error) {
	b = appendJobRefJSON(b, &s.JobRef)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, s.Name)
	b = append(b, `,"user_id":`...)
	b = strconv.AppendUint(b, uint64(s.UserID), 10)
	b = append(b, `,"group_id":`...)
	b = strconv.AppendUint(b, uint64(s.GroupID), 10)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, s.User)
	b = append(b, `,"partition":`...)
	b = appendJSONString(b, s.Partition)
	b = appendStringField(b, `,"account":`, s.Account)
	b = append(b, `,"cluster":`...)
	b = appendJSONString(b, s.Cluster)
	b = append(b, `,"script":`...)
	b = appendJSONString(b, s.Script)
	b = appendStringsField(b, `,"args":`, s.Args)
	b = append(b, `,"work_dir":`...)
	b = appendJSONString(b, s.WorkDir)
	b = append(b, `,"submit_dir":`...)
	b = appendJSONString(b, s.SubmitDir)
	b = appendStringField(b, `,"submit_host":`, s.SubmitHost)
	b = appendStringsField(b, `,"env":`, s.Env)
	b = append(b, `,"stdout":`...)
	b = appendJSONString(b, s.Stdout)
	b = appendStringField(b, `,"stderr":`, s.Stderr)
	b = appendStringField(b, `,"stdin":`, s.Stdin)
	b = appendStringField(b, `,"open_mode":`, s.OpenMode)
	b = append(b, `,"time_limit":`...)
	b = strconv.AppendInt(b, s.TimeLimit, 10)
	var err error
	if b, err = appendJSONTime(append(b, `,"start_time":`...), s.StartTime); err != nil {
		return b, err
	}
	b = append(b, `,"kill_wait":`...)
	b = strconv.AppendInt(b, s.KillWait, 10)
	if s.Signal != nil {
		b = appendSignalSpecJSON(append(b, `,"signal":`...), s.Signal)
	}
	b = append(b, `,"alloc":`...)
	if s.Alloc == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range s.Alloc {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNodeAllocJSON(b, &s.Alloc[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"num_tasks":`...)
	b = strconv.AppendInt(b, int64(s.NumTasks), 10)
	b = append(b, `,"cpus_per_task":`...)
	b = strconv.AppendInt(b, int64(s.CPUsPerTask), 10)
	b = appendStringsField(b, `,"gpu_uuids":`, s.GPUUUIDs)
	if a := s.Array; a != nil {
		b = append(b, `,"array":{"job_id":`...)
		b = strconv.AppendUint(b, a.JobID, 10)
		b = append(b, `,"task":`...)
		b = strconv.AppendInt(b, int64(a.Task), 10)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(a.Count), 10)
		b = append(b, `,"min":`...)
		b = strconv.AppendInt(b, int64(a.Min), 10)
		b = append(b, `,"max":`...)
		b = strconv.AppendInt(b, int64(a.Max), 10)
		b = append(b, `,"step":`...)
		b = strconv.AppendInt(b, int64(a.Step), 10)
		b = append(b, '}')
	}
	b = appendStringField(b, `,"container_image":`, s.ContainerImage)
	b = appendContainerMountsField(b, s.ContainerMounts)
	b = appendStringField(b, `,"qos":`, s.QOS)
	if r := s.Request; r != nil {
		b = appendEnvRequestJSON(append(b, `,"request":`...), r)
	}
	b = appendStringField(b, `,"topo_addr":`, s.TopoAddr)
	b = appendStringField(b, `,"topo_pattern":`, s.TopoPattern)
	return append(b, '}'), nil
}

func appendEnvRequestJSON(b []byte, r *EnvRequest) []byte {
	n0 := len(b)
	b = append(b, '{')
	b = appendIntField(b, `,"gpus":`, int64(r.GPUs))
	b = appendIntField(b, `,"gpus_per_node":`, int64(r.GPUsPerNode))
	b = appendIntField(b, `,"gpus_per_task":`, int64(r.GPUsPerTask))
	b = appendStringField(b, `,"gpu_type":`, r.GPUType)
	b = appendIntField(b, `,"gpu_shards":`, int64(r.GPUShards))
	b = appendIntField(b, `,"cpus_per_gpu":`, int64(r.CPUsPerGPU))
	b = appendIntField(b, `,"tasks_per_node":`, int64(r.TasksPerNode))
	b = appendIntField(b, `,"mem_per_node_mb":`, r.MemPerNodeMB)
	b = appendIntField(b, `,"mem_per_cpu_mb":`, r.MemPerCPUMB)
	b = appendIntField(b, `,"mem_per_gpu_mb":`, r.MemPerGPUMB)
	b = appendBoolField(b, `,"overcommit":true`, r.Overcommit)
	if len(b) > n0+1 {
		b = slices.Delete(b, n0+1, n0+2) // the first field's comma
	}
	return append(b, '}')
}

func appendNodeAllocJSON(b []byte, a *NodeAlloc) []byte {
	b = append(b, `{"node":`...)
	b = appendJSONString(b, a.Node)
	b = append(b, `,"cpus":`...)
	b = strconv.AppendInt(b, int64(a.CPUs), 10)
	b = append(b, `,"memory_mb":`...)
	b = strconv.AppendInt(b, a.MemoryMB, 10)
	b = appendIntsField(b, `,"gpus":`, a.GPUs)
	b = appendIntField(b, `,"gpu_mem_mb":`, a.GPUMemMB)
	b = appendIntField(b, `,"gpu_compute_pct":`, int64(a.GPUComputePct))
	b = append(b, `,"tasks":`...)
	b = strconv.AppendInt(b, int64(a.Tasks), 10)
	b = appendIntsField(b, `,"numa":`, a.NUMA)
	return append(b, '}')
}

// appendIntsField writes an omitempty []int.
func appendIntsField(b []byte, key string, ns []int) []byte {
	if len(ns) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '[')
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, ']')
}
