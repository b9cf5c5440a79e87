package api

import (
	"slices"
	"strconv"
	"time"
)

// AppendJSON appends to b the bytes json.Marshal(j) produces and returns
// the extended slice. The controller stores every job as this JSON
// (accounting's record column) at submit, start and end, and in a storm
// of small jobs encoding/json's reflection over Job was a few percent of
// its CPU, on the path every sbatch waits for.
//
// It fails exactly where json.Marshal does, which for Job is a time that
// RFC 3339 cannot spell (see SubmitRequest.AppendJSON). It then returns b
// at its original length and json.Marshal's error.
//
// Job does not implement json.Marshaler with this: the API still
// encodes jobs with encoding/json. Any change to Job, JobSpec, Share or
// the types they hold must be mirrored here (and in appendJobSpecJSON);
// TestJobJSONMatchesEncodingJSON fills every field and fails until it
// is.
func (j *Job) AppendJSON(b []byte) ([]byte, error) {
	if j == nil {
		return append(b, "null"...), nil
	}
	n0 := len(b)
	b = slices.Grow(b, jobJSONSizeHint(j))
	b = append(b, `{"job_id":`...)
	b = strconv.AppendUint(b, j.ID, 10)

	// encoding/json flattens the embedded JobSpec in place: none of its
	// names is shadowed by one of Job's, so all of them follow job_id.
	// appendJobSpecJSON writes them as an object of their own; its brace
	// becomes the comma after job_id and its closing brace is dropped.
	spec := len(b)
	b, err := appendJobSpecJSON(b, &j.JobSpec)
	if err != nil {
		return b[:n0], err
	}
	b[spec] = ','
	b = b[:len(b)-1]

	b = append(b, `,"user_id":`...)
	b = strconv.AppendUint(b, uint64(j.UserID), 10)
	b = append(b, `,"group_id":`...)
	b = strconv.AppendUint(b, uint64(j.GroupID), 10)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, j.User)
	b = append(b, `,"group":`...)
	b = appendJSONString(b, j.Group)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(j.State))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, string(j.Reason))
	b = appendStringField(b, `,"reason_detail":`, j.ReasonDetail)
	b = appendStringField(b, `,"placement":`, j.Placement)
	b = appendStringField(b, `,"hold_kind":`, string(j.HoldKind))
	b = appendStringField(b, `,"partition_list":`, j.PartitionList)
	b = append(b, `,"eff_priority":`...)
	b = strconv.AppendUint(b, uint64(j.EffPriority), 10)

	if b, err = appendJSONTime(append(b, `,"submit_time":`...), j.SubmitTime); err != nil {
		return b[:n0], err
	}
	if b, err = appendTimeField(b, `,"eligible_time":`, j.EligibleTime); err != nil {
		return b[:n0], err
	}
	if b, err = appendTimeField(b, `,"start_time":`, j.StartTime); err != nil {
		return b[:n0], err
	}
	if b, err = appendTimeField(b, `,"end_time":`, j.EndTime); err != nil {
		return b[:n0], err
	}
	if b, err = appendTimeField(b, `,"last_sched_eval":`, j.LastSchedEval); err != nil {
		return b[:n0], err
	}

	if len(j.Alloc) > 0 {
		b = append(b, `,"alloc":[`...)
		for i := range j.Alloc {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNodeAllocJSON(b, &j.Alloc[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"restarts":`...)
	b = strconv.AppendInt(b, int64(j.Restarts), 10)
	b = append(b, `,"exit":{"code":`...)
	b = strconv.AppendInt(b, int64(j.Exit.Code), 10)
	b = append(b, `,"signal":`...)
	b = strconv.AppendInt(b, int64(j.Exit.Signal), 10)
	b = append(b, '}')
	b = appendBoolField(b, `,"cancel_requested":true`, j.CancelRequested)
	b = appendBoolField(b, `,"timed_out":true`, j.TimedOut)
	b = appendBoolField(b, `,"launched":true`, j.Launched)
	b = appendIntField(b, `,"launch_failures":`, int64(j.LaunchFailures))
	b = appendStringsField(b, `,"launch_fail_nodes":`, j.LaunchFailNodes)
	b = appendBoolField(b, `,"requeue_requested":true`, j.RequeueRequested)
	if j.CancelledBy != nil {
		b = append(b, `,"cancelled_by":`...)
		b = strconv.AppendUint(b, uint64(*j.CancelledBy), 10)
	}
	b = appendStringField(b, `,"cluster":`, j.Cluster)

	if j.ArrayJobID != 0 {
		b = append(b, `,"array_job_id":`...)
		b = strconv.AppendUint(b, j.ArrayJobID, 10)
	}
	b = appendIntField(b, `,"array_task_id":`, int64(j.ArrayTaskID))
	if len(j.ArrayPending) > 0 {
		b = append(b, `,"array_pending":[`...)
		for i, r := range j.ArrayPending {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"first":`...)
			b = strconv.AppendInt(b, int64(r.First), 10)
			b = append(b, `,"last":`...)
			b = strconv.AppendInt(b, int64(r.Last), 10)
			b = append(b, `,"step":`...)
			b = strconv.AppendInt(b, int64(r.Step), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendIntField(b, `,"array_throttle":`, int64(j.ArrayThrottle))
	b = appendStringField(b, `,"submit_token":`, j.SubmitToken)

	// The embedded Share, flattened like JobSpec.
	if b, err = appendShareFields(b, &j.Share); err != nil {
		return b[:n0], err
	}
	return append(b, '}'), nil
}

// jobJSONSizeHint guesses the encoded size of j, so that one allocation
// usually holds it: the spec's bulk, the fixed fields (times are most of
// them) and the allocation, which grows with the node count.
func jobJSONSizeHint(j *Job) int {
	n := submitJSONSizeHint(&j.JobSpec) + 384 + len(j.ReasonDetail) + len(j.Placement) +
		96*len(j.Alloc) + 48*len(j.ArrayPending)
	for i := range j.Alloc {
		n += len(j.Alloc[i].Node) + 4*(len(j.Alloc[i].GPUs)+len(j.Alloc[i].NUMA))
	}
	return n
}

// appendShareFields writes s's fields, each after a comma, as they
// appear flattened into Job.
func appendShareFields(b []byte, s *Share) ([]byte, error) {
	var err error
	b = appendIntField(b, `,"level":`, int64(s.Level))
	if b, err = appendTimeField(b, `,"starving":`, s.Starving); err != nil {
		return b, err
	}
	b = appendBoolField(b, `,"started_starving":true`, s.StartedStarving)
	b = appendBoolField(b, `,"borrowing":true`, s.Borrowing)
	if p := s.Preempting; p != nil {
		b = append(b, `,"preempting":{"by":`...)
		b = strconv.AppendUint(b, p.By, 10)
		b = appendBoolField(b, `,"reclaim":true`, p.Reclaim)
		b = append(b, `,"mode":`...)
		b = appendJSONString(b, string(p.Mode))
		if b, err = appendJSONTime(append(b, `,"since":`...), p.Since); err != nil {
			return b, err
		}
		if b, err = appendJSONTime(append(b, `,"deadline":`...), p.Deadline); err != nil {
			return b, err
		}
		b = appendBoolField(b, `,"acked":true`, p.Acked)
		b = appendStringField(b, `,"why":`, p.Why)
		b = append(b, '}')
	}
	b = appendIntField(b, `,"preemptions":`, int64(s.Preemptions))
	b = appendStringsField(b, `,"prev_nodes":`, s.PrevNodes)
	if b, err = appendTimeField(b, `,"last_checkpoint":`, s.LastCheckpoint); err != nil {
		return b, err
	}
	return appendTimeField(b, `,"expected_start":`, s.ExpectedStart)
}

// appendTimeField writes an omitzero time: encoding/json asks the
// time's IsZero, so a zero instant is omitted in any location.
func appendTimeField(b []byte, key string, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return b, nil
	}
	return appendJSONTime(append(b, key...), t)
}
