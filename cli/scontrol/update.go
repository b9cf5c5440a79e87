package scontrol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// jobAction runs hold, uhold, release or requeue on a job list.
func (o *Options) jobAction(ctx context.Context, action string, args []string) error {
	ids, tasks, err := parseJobIDs(args)
	if err != nil {
		return err
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	resp, err := c.UpdateJobs(ctx, api.JobUpdate{IDs: ids, Tasks: tasks, Action: action})
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	return o.reportResults(resp)
}

// reportResults prints each failed job like Slurm ("scontrol: error:
// Job is no longer pending execution for job 5") and fails with exit 1
// when any job failed.
func (o *Options) reportResults(resp api.CancelResponse) error {
	failed := 0
	for _, r := range resp.Results {
		if r.Error == "" {
			continue
		}
		failed++
		if o.Quiet {
			continue
		}
		msg, id := r.Error, strconv.FormatUint(r.JobID, 10)
		if r.ID != "" {
			id = r.ID
		}
		if !strings.Contains(msg, "job "+id) {
			msg = fmt.Sprintf("%s for job %s", msg, id)
		}
		cmdutil.Errorf(o.IO.ErrOut, "scontrol", "%s", msg)
	}
	if failed > 0 {
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	return nil
}

// kv is one Key=Value word of an update command.
type kv struct {
	key, val, word string
}

func splitKVs(args []string) ([]kv, error) {
	out := make([]kv, 0, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid input: %s (expected Key=Value)", a)
		}
		out = append(out, kv{key: strings.ToLower(k), val: unquote(v), word: a})
	}
	return out, nil
}

// unquote strips one pair of matching quotes, for values written as
// Reason="disk full" inside a single shell word.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

func (o *Options) update(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("too few arguments for keyword: update")
	}
	kvs, err := splitKVs(args)
	if err != nil {
		return err
	}
	for _, p := range kvs {
		switch p.key {
		case "jobid", "job":
			return o.updateJobs(ctx, kvs)
		case "nodename", "node", "nodes":
			return o.updateNodes(ctx, kvs)
		case "partitionname", "reservationname", "reservation", "frontendname", "stepid", "suspendexcnodes":
			return fmt.Errorf("update of %s is not supported by Tide", args[0])
		}
	}
	return fmt.Errorf("no entity to update: give JobId=ID or NodeName=NODES")
}

// jobUpdate is a parsed `update JobId=…` command.
type jobUpdate struct {
	ids   []uint64
	tasks []api.TaskRef
	u     api.JobUpdate
	// relLimit is a TimeLimit=+T / -T change in seconds (0 = none).
	relLimit int64
}

func parseJobUpdate(kvs []kv) (*jobUpdate, error) {
	ju := &jobUpdate{u: api.JobUpdate{Action: "update"}}
	set := 0
	for _, p := range kvs {
		v := p.val
		switch p.key {
		case "jobid", "job":
			ids, tasks, err := parseJobIDs([]string{v})
			if err != nil {
				return nil, err
			}
			ju.ids, ju.tasks = append(ju.ids, ids...), append(ju.tasks, tasks...)
			continue
		case "dependency":
			if v != "" {
				if _, err := api.ParseDependency(v); err != nil {
					return nil, fmt.Errorf("Invalid dependency specification: %s", v)
				}
			}
			ju.u.Dependency = &v
		case "arraytaskthrottle":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("Invalid ArrayTaskThrottle value: %s", v)
			}
			ju.u.ArrayThrottle = &n
		case "timelimit", "time":
			// +T and -T change the current limit; a bare "-1" is
			// Slurm's UNLIMITED, not a decrement.
			if strings.HasPrefix(v, "+") || (strings.HasPrefix(v, "-") && v != "-1") {
				secs, err := api.ParseTimeLimit(v[1:])
				if err != nil || secs == api.Infinite {
					return nil, fmt.Errorf("invalid time limit specification: %s", v)
				}
				if v[0] == '-' {
					secs = -secs
				}
				ju.relLimit = secs
			} else {
				secs, err := api.ParseTimeLimit(v)
				if err != nil {
					return nil, fmt.Errorf("invalid time limit specification: %s", v)
				}
				ju.u.TimeLimit = &secs
			}
		case "name", "jobname":
			if v == "" {
				return nil, fmt.Errorf("invalid job name: empty")
			}
			ju.u.Name = &v
		case "comment":
			ju.u.Comment = &v
		case "partition":
			if v == "" {
				return nil, fmt.Errorf("invalid partition name: empty")
			}
			ju.u.Partition = &v
		case "account":
			ju.u.Account = &v
		case "priority":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("invalid priority: %s", v)
			}
			p32 := uint32(n)
			ju.u.Priority = &p32
		case "nice":
			n, err := strconv.Atoi(v)
			if err != nil || n < -10000 || n > 10000 {
				return nil, fmt.Errorf("invalid nice value, must be between -10000 and 10000: %s", v)
			}
			ju.u.Nice = &n
		default:
			return nil, api.Invalid("Update of this parameter is not supported: %s", p.word)
		}
		set++
	}
	if len(ju.ids) == 0 && len(ju.tasks) == 0 {
		return nil, fmt.Errorf("no JobId given")
	}
	if set == 0 {
		return nil, fmt.Errorf("no changes requested for job %s", joinIDs(ju.ids, ju.tasks))
	}
	if ju.relLimit != 0 && len(ju.tasks) > 0 {
		return nil, fmt.Errorf("TimeLimit=+/-T is not supported for array tasks; give an absolute limit")
	}
	return ju, nil
}

func (o *Options) updateJobs(ctx context.Context, kvs []kv) error {
	ju, err := parseJobUpdate(kvs)
	if err != nil {
		return err
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	if ju.relLimit == 0 {
		ju.u.IDs, ju.u.Tasks = ju.ids, ju.tasks
		resp, err := c.UpdateJobs(ctx, ju.u)
		if err != nil {
			return fmt.Errorf("slurm_update error: %w", err)
		}
		return o.reportResults(resp)
	}
	// A relative limit depends on each job's current one, so every job
	// gets its own request.
	var all api.CancelResponse
	for _, id := range ju.ids {
		j, err := c.Job(ctx, id)
		if errors.Is(err, api.ErrNotFound) {
			all.Results = append(all.Results, api.JobResult{JobID: id, Error: errInvalidJob})
			continue
		}
		if err != nil {
			return fmt.Errorf("slurm_update error: %w", err)
		}
		if j.TimeLimit <= 0 {
			all.Results = append(all.Results, api.JobResult{JobID: id,
				Error: "TimeLimit increment/decrement not possible without a finite time limit"})
			continue
		}
		secs := j.TimeLimit + ju.relLimit
		if secs <= 0 {
			all.Results = append(all.Results, api.JobResult{JobID: id,
				Error: fmt.Sprintf("TimeLimit decrement of %s leaves no time", api.FormatElapsedLong(-ju.relLimit))})
			continue
		}
		u := ju.u
		u.IDs = []uint64{id}
		u.TimeLimit = &secs
		resp, err := c.UpdateJobs(ctx, u)
		if err != nil {
			return fmt.Errorf("slurm_update error: %w", err)
		}
		all.Results = append(all.Results, resp.Results...)
	}
	return o.reportResults(all)
}

// nodeStates are the State= values `update NodeName=` accepts.
var nodeStates = []string{"DRAIN", "RESUME", "DOWN", "UNDRAIN"}

func parseNodeUpdate(kvs []kv) (api.NodeUpdate, error) {
	var u api.NodeUpdate
	reasonSet := false
	for _, p := range kvs {
		switch p.key {
		case "nodename", "node", "nodes":
			hosts, err := hostlist.Expand(p.val)
			if err != nil || len(hosts) == 0 {
				return u, fmt.Errorf("invalid node name specification: %s", p.val)
			}
			u.Names = append(u.Names, hosts...)
		case "state":
			st := strings.ToUpper(p.val)
			if st == "IDLE" {
				// Slurm's slurmctld takes IDLE as RESUME: the node's
				// DOWN and DRAIN go, its jobs stay.
				st = "RESUME"
			}
			if !contains(nodeStates, st) {
				return u, fmt.Errorf("invalid node state specified: %s (valid: %s)", p.val, strings.Join(nodeStates, ", "))
			}
			u.State = st
		case "reason":
			u.Reason = p.val
			reasonSet = true
		default:
			return u, api.Invalid("Update of this parameter is not supported: %s", p.word)
		}
	}
	if u.State == "" && !reasonSet {
		return u, fmt.Errorf("no changes requested for node %s", hostlist.Compress(u.Names))
	}
	return u, nil
}

// errNoReason is Slurm's exact refusal of DRAIN/DOWN without Reason=.
const errNoReason = "You must specify a reason when DOWNING or DRAINING a node. Request denied"

func (o *Options) updateNodes(ctx context.Context, kvs []kv) error {
	u, err := parseNodeUpdate(kvs)
	if err != nil {
		return err
	}
	if (u.State == "DRAIN" || u.State == "DOWN") && strings.TrimSpace(u.Reason) == "" {
		fmt.Fprintln(o.IO.ErrOut, errNoReason)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	if err := c.UpdateNodes(ctx, u); err != nil {
		return fmt.Errorf("slurm_update error: %w", err)
	}
	return nil
}
