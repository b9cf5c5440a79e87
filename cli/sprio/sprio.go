package sprio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// Formats, in the -o syntax of the internal field letters (see fields).
// JOBID and PARTITION come first as in Slurm's sprio, so that scripts
// reading the first column keep working.
const (
	DefaultFormat = "%.15i %9r %9a %.9q %.5y %.10A %.10Y %.19S %.11H %R"
	UserFormat    = "%.15i %9r %.8u %9a %.9q %.5y %.10A %.10Y %.19S %.11H %R"
	LongFormat    = "%.15i %9r %.8u %9a %.9q %.5y %.5k %.10A %.10Y %.19S %.11H %.5g %D"
)

// noMatch is what Slurm's sprio prints (on stdout) when -j names no
// pending job.
const noMatch = "Unable to find jobs matching user/id(s) specified"

// Options are sprio's parsed command line.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)
	Now func() time.Time
	UID func() int
	// Loc is the zone times are printed in.
	Loc *time.Location

	Jobs       string
	Args       []string
	Users      string
	Partitions string
	Me         bool
	Long       bool
	Norm       bool
	NoHeader   bool
	JSON       bool
	// JobsFlag is -j, with or without a list; Verbose counts -v.
	JobsFlag bool
	Verbose  int
	// Weights is -w: the multifactor weights line instead of the jobs
	// (policy tide only).
	Weights bool
	// Clusters is -M/--clusters: it must name the controller's cluster.
	Clusters string
	// Getenv reads POSIXLY_CORRECT (nil: none).
	Getenv func(string) string
}

// NewCmd returns sprio (tide prio).
func NewCmd(f *cmdutil.Factory) *cobra.Command { return newCmd(f, time.Local) }

// newCmd builds sprio. Cobra only dispatches: sprio reads its own
// arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Now: f.Now, UID: f.UID, Getenv: f.Getenv, Loc: loc}
	return cmdutil.RawCommand("sprio [OPTIONS] [JOBID...]", "View the factors of pending jobs' priority",
		func(ctx context.Context, args []string) error {
			if done, err := o.parseArgs(args); done || err != nil {
				return err
			}
			if err := o.checkClusters(ctx); err != nil {
				return err
			}
			return o.Run(ctx)
		})
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// filter compiles the selection: pending jobs, by id, user, partition.
func (o *Options) filter() (api.JobFilter, bool, error) {
	f := api.JobFilter{States: []api.JobState{api.StatePending}}
	ids := append(api.SplitJobIDList(o.Jobs), o.Args...)
	for _, s := range ids {
		jid, tasks, err := api.ParseJobIDs(s)
		if err != nil {
			return f, false, cmdutil.Usagef("Invalid job id: %s", s)
		}
		f.IDs = append(f.IDs, jid...)
		f.Tasks = append(f.Tasks, tasks...)
	}
	f.Users = splitList(o.Users)
	if o.Me {
		f.Users = append(f.Users, strconv.Itoa(o.UID()))
	}
	f.Partitions = splitList(o.Partitions)
	return f, len(ids) > 0, nil
}

// Run loads the pending jobs and the queues and prints the factors.
func (o *Options) Run(ctx context.Context) error {
	flt, byID, err := o.filter()
	if err != nil {
		return err
	}
	format := DefaultFormat
	switch {
	case o.Long:
		format = LongFormat
	case len(flt.Users) > 0:
		format = UserFormat
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	list, err := c.Jobs(ctx, flt)
	if err != nil {
		return fmt.Errorf("Couldn't get priority factors from controller: %w", err)
	}
	pl, err := multifactor(ctx, c, flt)
	if err != nil {
		return err
	}
	if pl == nil && o.Weights {
		return unsupported("-w/--weights")
	}
	ql, err := c.Queues(ctx)
	switch {
	case errors.Is(err, api.ErrNotFound):
		// A controller without queues: levels from the jobs alone.
		ql = api.QueueList{}
	case err != nil:
		return fmt.Errorf("Couldn't get queues from controller: %w", err)
	}
	now := list.Now
	if now.IsZero() {
		now = o.Now()
	}
	e := &env{now: now, loc: o.Loc, share: jobfmt.NewSharing(ql), norm: o.Norm}
	if e.loc == nil {
		e.loc = time.Local
	}
	jobs := make([]*api.Job, 0, len(list.Jobs))
	for i := range list.Jobs {
		if list.Jobs[i].State == api.StatePending {
			jobs = append(jobs, &list.Jobs[i])
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ID < jobs[b].ID })
	w := bufio.NewWriter(o.IO.Out)
	if o.JSON {
		if err := writeJSON(w, jobs, e, pl); err != nil {
			return err
		}
		return flush(w)
	}
	if byID && len(jobs) == 0 && !o.Weights {
		fmt.Fprintln(w, noMatch)
		return flush(w)
	}
	if pl != nil {
		out, err := o.writeMultifactor(jobs, pl, len(flt.Users) > 0)
		if err != nil {
			return err
		}
		if _, err := w.Write(out); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return flush(w)
	}
	tbl, err := compile(format, e)
	if err != nil {
		return err
	}
	var line []byte
	if !o.NoHeader {
		line = tbl.AppendHeader(line)
	}
	for _, j := range jobs {
		line = tbl.AppendRow(line, j)
	}
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return flush(w)
}

func flush(w *bufio.Writer) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// row is one job's factors for --json.
type row struct {
	JobID       string     `json:"job_id"`
	Partition   string     `json:"partition"`
	User        string     `json:"user"`
	Queue       string     `json:"queue,omitempty"`
	QOS         string     `json:"qos,omitempty"`
	Level       int        `json:"level"`
	Asked       bool       `json:"level_asked"`
	Waited      int64      `json:"waited"`
	AgedLevel   int        `json:"aged_level"`
	Starving    *time.Time `json:"starving,omitempty"`
	QueueUsed   *int       `json:"queue_used_gpus,omitempty"`
	QueueShare  *int       `json:"queue_guaranteed_gpus,omitempty"`
	GPUs        int        `json:"gpus"`
	Reason      string     `json:"reason"`
	ReasonsText string     `json:"reasons,omitempty"`
	// Multifactor are the job's factors under policy tide.
	Multifactor *mfJSON `json:"multifactor,omitempty"`
}

func writeJSON(w io.Writer, jobs []*api.Job, e *env, pl *api.PriorityList) error {
	var factors map[uint64]*api.JobPriority
	if pl != nil {
		factors = make(map[uint64]*api.JobPriority, len(pl.Jobs))
		for i := range pl.Jobs {
			factors[pl.Jobs[i].JobID] = &pl.Jobs[i]
		}
	}
	rows := make([]row, 0, len(jobs))
	for _, j := range jobs {
		lvl, asked := e.share.Level(j)
		r := row{
			JobID: jobID(j), Partition: j.Partition, User: jobfmt.NameOr(j.User, j.UserID), Queue: j.Account,
			QOS: e.share.ClassName(j), Level: lvl, Asked: asked, Waited: int64(jobfmt.Waited(j, e.now) / time.Second),
			AgedLevel: e.share.AgedLevel(j, e.now), GPUs: j.ReqGPUs(), Reason: jobfmt.Reason(j), ReasonsText: j.ReasonDetail,
		}
		if !j.Starving.IsZero() {
			t := j.Starving
			r.Starving = &t
		}
		if q := e.share.Queue(j.Account); q != nil {
			used, g := q.UsedGPUs, q.Guaranteed
			r.QueueUsed, r.QueueShare = &used, &g
		}
		if f := factors[j.ID]; f != nil {
			r.Multifactor = &mfJSON{Priority: f.Priority, Age: f.Age, Length: f.Length, JobSize: f.JobSize,
				Fairshare: f.Fairshare, Nice: f.Nice}
		}
		rows = append(rows, r)
	}
	return cmdutil.WriteJSON(w, rows)
}
