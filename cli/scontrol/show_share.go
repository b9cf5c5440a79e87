package scontrol

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// priority is Priority=: the job's level (1-10) when the controller
// runs queues and levels, else the priority it ordered by.
func priority(j *api.Job) uint32 {
	if j.Level > 0 {
		return uint32(j.Level)
	}
	return j.EffPriority
}

// loadSharing fetches the queue answer when a job starves (its aged
// level depends on the starvation age and the controller's clock). A
// controller that cannot say leaves the default age: the show must not
// fail over one value.
func (o *Options) loadSharing(ctx context.Context, c cmdutil.API, jobs []api.Job, now time.Time) (*jobfmt.Sharing, time.Time) {
	for i := range jobs {
		if jobs[i].Starving.IsZero() || jobs[i].State != api.StatePending {
			continue
		}
		if now.IsZero() {
			if info, err := c.Cluster(ctx); err == nil {
				now = info.Now
			}
		}
		if ql, err := c.Queues(ctx); err == nil {
			return jobfmt.NewSharing(ql), now
		}
		break
	}
	return nil, now
}

// shareLines adds Tide's sharing lines, after the other Tide lines: the
// job's place in the sharing machinery (only the values that are set),
// and the preemption in progress.
func (o *Options) shareLines(r *record, j *api.Job, now time.Time, share *jobfmt.Sharing) {
	var kv []string
	add := func(k, v string) { kv = append(kv, k+"="+v) }
	if j.Account != "" && (j.Level > 0 || !j.Starving.IsZero() || j.Borrowing || j.Preemptions > 0) {
		add("Queue", j.Account)
	}
	if j.Level > 0 {
		add("Level", fmt.Sprint(j.Level))
	}
	if !j.Starving.IsZero() {
		if j.State == api.StatePending {
			add("AgedLevel", fmt.Sprint(share.AgedLevel(j, now)))
		}
		add("Starving", fmtTime(j.Starving, o.Loc))
	}
	if j.Borrowing {
		add("Borrowing", yesNo(true))
	}
	if j.Preemptions > 0 {
		add("Preemptions", fmt.Sprint(j.Preemptions))
	}
	if len(j.PrevNodes) > 0 {
		add("PrevNodes", hostlist.Compress(j.PrevNodes))
	}
	if !j.LastCheckpoint.IsZero() {
		add("LastCheckpoint", fmtTime(j.LastCheckpoint, o.Loc))
	}
	if len(kv) > 0 {
		r.add("Tide:%s", strings.Join(kv, " "))
	}
	if p := j.Preempting; p != nil && j.State.Active() {
		line := fmt.Sprintf("Tide:Preempting=JobId=%d Mode=%s Reclaim=%s Since=%s Deadline=%s Acked=%s",
			p.By, p.Mode, yesNo(p.Reclaim), fmtTime(p.Since, o.Loc), fmtTime(p.Deadline, o.Loc), yesNo(p.Acked))
		if p.Why != "" {
			line += " Why=" + o.tideText(p.Why)
		}
		r.add("%s", line)
	}
}
