package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// Defaults of the sharing settings.
const (
	// DefaultStarvationAge is scheduler.starvation_age's default: a job
	// waiting longer is Starving and rises one level per further period.
	DefaultStarvationAge = 30 * time.Minute
	// DefaultSubmitRate is submit.rate_per_queue's default, in jobs per
	// second accepted straight into a queue.
	DefaultSubmitRate = 50.0
	// DefaultSubmitBuffer is submit.buffer's default: how many
	// submissions may wait in one queue's buffer before 429.
	DefaultSubmitBuffer = 10000
)

// QueueConfig is one queue (a Slurm account, sbatch -A) as written.
// Guaranteed and Cap are whole GPUs ("48") or a percentage ("25%") of
// the GPUs of Partition when given, else of the cluster.
type QueueConfig struct {
	Name   string   `mapstructure:"name" json:"name"`
	Parent string   `mapstructure:"parent" json:"parent,omitempty"`
	Users  []string `mapstructure:"users" json:"users,omitempty"`
	Groups []string `mapstructure:"groups" json:"groups,omitempty"`
	// Partition is the base of percentages ("" = the whole cluster).
	Partition  string `mapstructure:"partition" json:"partition,omitempty"`
	Guaranteed string `mapstructure:"guaranteed" json:"guaranteed,omitempty"`
	Cap        string `mapstructure:"cap" json:"cap,omitempty"`
	// LendLimit and BorrowLimit are GPUs; nil is unlimited.
	LendLimit         *int `mapstructure:"lend_limit" json:"lend_limit,omitempty"`
	BorrowLimit       *int `mapstructure:"borrow_limit" json:"borrow_limit,omitempty"`
	MaxRunningPerUser int  `mapstructure:"max_running_per_user" json:"max_running_per_user,omitempty"`
	MaxSubmitPerUser  int  `mapstructure:"max_submit_per_user" json:"max_submit_per_user,omitempty"`
	MaxGPUsPerUser    int  `mapstructure:"max_gpus_per_user" json:"max_gpus_per_user,omitempty"`
	// SubmitRate overrides submit.rate_per_queue for this queue (jobs/s).
	SubmitRate float64 `mapstructure:"submit_rate" json:"submit_rate,omitempty"`
}

// QOSConfig overrides a default job class or adds one. Zero (or
// omitted) fields of a default class keep the default.
type QOSConfig struct {
	Name         string `mapstructure:"name" json:"name"`
	MinLevel     int    `mapstructure:"min_level" json:"min_level,omitempty"`
	MaxLevel     int    `mapstructure:"max_level" json:"max_level,omitempty"`
	DefaultLevel int    `mapstructure:"default_level" json:"default_level,omitempty"`
	// PreemptMode is requeue, cancel, suspend or off.
	PreemptMode string `mapstructure:"preempt_mode" json:"preempt_mode,omitempty"`
	PreemptGap  int    `mapstructure:"preempt_gap" json:"preempt_gap,omitempty"`
	// GraceTime, MaxTime and MinRuntime are durations ("300s", "2h");
	// MaxTime 0 is no limit.
	GraceTime  *time.Duration `mapstructure:"grace_time" json:"grace_time,omitempty"`
	MaxTime    *time.Duration `mapstructure:"max_time" json:"max_time,omitempty"`
	MinRuntime *time.Duration `mapstructure:"min_runtime" json:"min_runtime,omitempty"`
	// Users, Groups and Accounts may use the class (with --qos); none
	// given: everybody, except for the built-in inference class, which
	// is for operators until its entry grants it. ALL in a list is
	// everybody.
	Users    []string `mapstructure:"users" json:"users,omitempty"`
	Groups   []string `mapstructure:"groups" json:"groups,omitempty"`
	Accounts []string `mapstructure:"accounts" json:"accounts,omitempty"`
}

// SubmitConfig bounds submission storms: each queue accepts RatePerQueue
// jobs per second straight away (and each user RatePerUser, 0 = no
// limit); more wait in the queue's buffer, released in arrival order at
// the rate, and beyond Buffer waiting submissions are answered 429.
//
// The Max fields bound what one submission may carry (limits.go in
// ctld checks them, at submit and at update): Slurm's
// SchedulerParameters=max_script_size, and the environment a job's
// processes are started with.
type SubmitConfig struct {
	RatePerQueue float64 `mapstructure:"rate_per_queue" json:"rate_per_queue"`
	RatePerUser  float64 `mapstructure:"rate_per_user" json:"rate_per_user"`
	Buffer       int     `mapstructure:"buffer" json:"buffer"`
	// MaxScriptSize is the largest batch script in bytes.
	MaxScriptSize int `mapstructure:"max_script_size" json:"max_script_size"`
	// MaxEnvSize is the most bytes of environment (--export) and
	// script arguments, MaxEnvVars the most variables.
	MaxEnvSize int `mapstructure:"max_env_size" json:"max_env_size"`
	MaxEnvVars int `mapstructure:"max_env_vars" json:"max_env_vars"`
}

// Defaults and bounds of the submission size limits (ctld/api's, which
// clients check against too).
const (
	DefaultMaxScriptSize = api.DefaultMaxScriptSize
	MaxMaxScriptSize     = api.MaxMaxScriptSize
	DefaultMaxEnvSize    = api.DefaultMaxEnvSize
	MaxMaxEnvSize        = api.MaxMaxEnvSize
	DefaultMaxEnvVars    = api.DefaultMaxEnvVars
)

// Amount is a GPU amount as written: whole GPUs, or a percentage of a
// base that is known only with the nodes.
type Amount struct {
	GPUs    int
	Percent float64
	// Set is false when the key was omitted.
	Set bool
}

// Resolve is the amount in whole GPUs of total (percentages round down).
func (a Amount) Resolve(total int) int {
	if a.Percent > 0 {
		return int(math.Floor(a.Percent * float64(total) / 100))
	}
	return a.GPUs
}

func (a Amount) String() string {
	if a.Percent > 0 {
		return strconv.FormatFloat(a.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(a.GPUs)
}

// parseAmount reads "48" or "25%".
func parseAmount(s string) (Amount, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Amount{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
			return Amount{}, fmt.Errorf("%q is not a percentage from 0%% to 100%%", s)
		}
		return Amount{Percent: f, Set: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Amount{}, fmt.Errorf("%q is not a GPU count or a percentage like 25%%", s)
	}
	return Amount{GPUs: n, Set: true}, nil
}

// Queue is a validated queue: amounts parsed, limits defaulted.
type Queue struct {
	Name, Parent, Partition string
	Users, Groups           []string
	Guaranteed, Cap         Amount
	// LendLimit and BorrowLimit are GPUs, -1 = unlimited.
	LendLimit, BorrowLimit                              int
	MaxRunningPerUser, MaxSubmitPerUser, MaxGPUsPerUser int
	// SubmitRate is jobs per second accepted straight away.
	SubmitRate float64
}

// Open reports whether the queue names no members: then everybody may
// submit to it.
func (q *Queue) Open() bool { return len(q.Users) == 0 && len(q.Groups) == 0 }

// Member reports whether user (with groups) may submit to q.
func (q *Queue) Member(user string, groups []string) bool {
	if q.Open() || slices.Contains(q.Users, user) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(q.Groups, g) {
			return true
		}
	}
	return false
}

// Members describes who may submit, for error messages.
func (q *Queue) Members() string {
	var parts []string
	if len(q.Users) > 0 {
		parts = append(parts, "users "+strings.Join(q.Users, ","))
	}
	if len(q.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(q.Groups, ","))
	}
	if len(parts) == 0 {
		return "everyone"
	}
	return strings.Join(parts, "; ")
}

// defaultQOS is the built-in job class table (issue 5), the
// scheduling core's.
func defaultQOS() map[string]*sched.QOSInfo { return sched.DefaultQOS() }

// defaultQOSOrder lists the default classes in the order they are shown.
var defaultQOSOrder = []string{api.QOSTraining, api.QOSInference, api.QOSBatch, api.QOSDebug}

// Sharing is the validated sharing configuration of a Cluster.
type Sharing struct {
	// Queues in the order written; nil without queues.
	Queues []Queue
	// QOS are the job classes by name, QOSOrder their names in order
	// (defaults first, then added ones).
	QOS        map[string]*sched.QOSInfo
	QOSOrder   []string
	DefaultQOS string
	// QOSAccess says who may use each class (every class has one).
	QOSAccess map[string]*ClassAccess
	// Configured is true when the file has queues or qos: levels
	// replace Slurm-style priorities then.
	Configured bool
}

// Queue returns the queue called name, or nil.
func (s *Sharing) Queue(name string) *Queue {
	for i := range s.Queues {
		if s.Queues[i].Name == name {
			return &s.Queues[i]
		}
	}
	return nil
}

// QueueNames lists the queue names in order.
func (s *Sharing) QueueNames() []string {
	out := make([]string, len(s.Queues))
	for i := range s.Queues {
		out[i] = s.Queues[i].Name
	}
	return out
}

// GPUTotal counts the declared GPUs of partition part's nodes (of all
// nodes when part is ""): the base of queue percentages at validation.
func (cl *Cluster) GPUTotal(part string) int {
	total := 0
	names := cl.NodeOrder
	if part != "" {
		names = nil
		for _, p := range cl.Partitions {
			if p.Name == part {
				names = p.Nodes
			}
		}
	}
	for _, n := range names {
		total += cl.NodeDecl[n].GPUs
	}
	return total
}

// validateSharing checks queues, qos, default_qos and the submit and
// aging settings, and fills cl.Sharing.
func (c Config) validateSharing(cl *Cluster, bad func(string, ...any)) {
	sh := Sharing{QOS: defaultQOS(), QOSOrder: slices.Clone(defaultQOSOrder), DefaultQOS: c.DefaultQOS,
		Configured: len(c.Queues) > 0 || len(c.QOS) > 0, QOSAccess: map[string]*ClassAccess{}}
	if c.Submit.RatePerQueue <= 0 {
		bad("submit.rate_per_queue: %g must be positive", c.Submit.RatePerQueue)
	}
	if c.Submit.RatePerUser < 0 {
		bad("submit.rate_per_user: %g must not be negative (0 = no per-user limit)", c.Submit.RatePerUser)
	}
	if c.Submit.Buffer < 0 {
		bad("submit.buffer: must not be negative")
	}
	if n := c.Submit.MaxScriptSize; n < 1 || n > MaxMaxScriptSize {
		bad("submit.max_script_size: %d is not between 1 and %d bytes", n, MaxMaxScriptSize)
	}
	if n := c.Submit.MaxEnvSize; n < 1 || n > MaxMaxEnvSize {
		bad("submit.max_env_size: %d is not between 1 and %d bytes", n, MaxMaxEnvSize)
	}
	if n := c.Submit.MaxEnvVars; n < 1 {
		bad("submit.max_env_vars: %d must be at least 1", n)
	}
	seenQOS := map[string]bool{}
	for i, q := range c.QOS {
		key := fmt.Sprintf("qos[%d]", i)
		if q.Name == "" {
			bad("%s.name: must not be empty", key)
			continue
		}
		key = fmt.Sprintf("qos[%d] (%s)", i, q.Name)
		if seenQOS[q.Name] {
			bad("%s: qos %s defined twice", key, q.Name)
			continue
		}
		seenQOS[q.Name] = true
		info, ok := sh.QOS[q.Name]
		if !ok {
			info = &sched.QOSInfo{Name: q.Name, MinLevel: api.MinLevel, MaxLevel: api.MaxLevel, PreemptGap: 1,
				Mode: api.PreemptRequeue}
			sh.QOS[q.Name] = info
			sh.QOSOrder = append(sh.QOSOrder, q.Name)
		}
		if q.MinLevel != 0 {
			info.MinLevel = q.MinLevel
		}
		if q.MaxLevel != 0 {
			info.MaxLevel = q.MaxLevel
		}
		if q.DefaultLevel != 0 {
			info.DefaultLevel = q.DefaultLevel
		} else if !ok {
			info.DefaultLevel = (info.MinLevel + info.MaxLevel) / 2
		}
		for _, l := range []struct {
			name string
			v    int
		}{{"min_level", info.MinLevel}, {"max_level", info.MaxLevel}, {"default_level", info.DefaultLevel}} {
			if l.v < api.MinLevel || l.v > api.MaxLevel {
				bad("%s.%s: %d is not a level from %d to %d", key, l.name, l.v, api.MinLevel, api.MaxLevel)
			}
		}
		if info.MinLevel > info.MaxLevel {
			bad("%s: min_level %d is above max_level %d", key, info.MinLevel, info.MaxLevel)
		} else if info.DefaultLevel < info.MinLevel || info.DefaultLevel > info.MaxLevel {
			bad("%s.default_level: %d is not between min_level %d and max_level %d", key, info.DefaultLevel, info.MinLevel, info.MaxLevel)
		}
		switch m := api.PreemptMode(strings.ToLower(q.PreemptMode)); m {
		case "":
		case api.PreemptRequeue, api.PreemptCancel, api.PreemptSuspend, api.PreemptNever:
			info.Mode = m
		default:
			bad("%s.preempt_mode: %q is not requeue, cancel, suspend or off", key, q.PreemptMode)
		}
		if q.PreemptGap < 0 {
			bad("%s.preempt_gap: must not be negative", key)
		} else if q.PreemptGap > 0 {
			info.PreemptGap = q.PreemptGap
		}
		for _, d := range []struct {
			name string
			in   *time.Duration
			out  *int64
		}{{"grace_time", q.GraceTime, &info.GraceTime}, {"max_time", q.MaxTime, &info.MaxTime},
			{"min_runtime", q.MinRuntime, &info.MinRuntime}} {
			if d.in == nil {
				continue
			}
			if *d.in < 0 {
				bad("%s.%s: %s must not be negative", key, d.name, *d.in)
				continue
			}
			*d.out = int64(d.in.Round(time.Second) / time.Second)
		}
	}
	for _, name := range sh.QOSOrder {
		var entry *QOSConfig
		for i := range c.QOS {
			if c.QOS[i].Name == name {
				entry = &c.QOS[i]
			}
		}
		sh.QOSAccess[name] = classAccess(name, entry)
	}
	if sh.DefaultQOS == "" {
		sh.DefaultQOS = api.QOSBatch
	}
	if _, ok := sh.QOS[sh.DefaultQOS]; !ok {
		bad("default_qos: %q is not a qos (known: %s)", sh.DefaultQOS, strings.Join(sh.QOSOrder, ", "))
	} else if a := sh.QOSAccess[sh.DefaultQOS]; !a.All {
		// Every job without --qos lands in it.
		bad("default_qos: class %s is open to %s only; the default class must be open to everyone", sh.DefaultQOS, a.Grants())
	}

	byName := map[string]*QueueConfig{}
	for i := range c.Queues {
		q := &c.Queues[i]
		key := fmt.Sprintf("queues[%d]", i)
		if q.Name == "" {
			bad("%s.name: must not be empty", key)
			continue
		}
		key = fmt.Sprintf("queues[%d] (%s)", i, q.Name)
		if byName[q.Name] != nil {
			bad("%s: queue %s defined twice", key, q.Name)
			continue
		}
		byName[q.Name] = q
		out := Queue{Name: q.Name, Parent: q.Parent, Partition: q.Partition, Users: q.Users, Groups: q.Groups,
			LendLimit: -1, BorrowLimit: -1, MaxRunningPerUser: q.MaxRunningPerUser,
			MaxSubmitPerUser: q.MaxSubmitPerUser, MaxGPUsPerUser: q.MaxGPUsPerUser, SubmitRate: q.SubmitRate}
		var err error
		if out.Guaranteed, err = parseAmount(q.Guaranteed); err != nil {
			bad("%s.guaranteed: %v", key, err)
		}
		if out.Cap, err = parseAmount(q.Cap); err != nil {
			bad("%s.cap: %v", key, err)
		}
		if q.Partition != "" && !slices.ContainsFunc(cl.Partitions, func(p api.Partition) bool { return p.Name == q.Partition }) {
			bad("%s.partition: %q is not a partition", key, q.Partition)
		}
		for _, l := range []struct {
			name string
			in   *int
			out  *int
		}{{"lend_limit", q.LendLimit, &out.LendLimit}, {"borrow_limit", q.BorrowLimit, &out.BorrowLimit}} {
			if l.in == nil {
				continue
			}
			if *l.in < -1 {
				bad("%s.%s: %d must be a GPU count (or -1 for no limit)", key, l.name, *l.in)
			}
			*l.out = *l.in
		}
		for _, l := range []struct {
			name string
			v    int
		}{{"max_running_per_user", q.MaxRunningPerUser}, {"max_submit_per_user", q.MaxSubmitPerUser},
			{"max_gpus_per_user", q.MaxGPUsPerUser}} {
			if l.v < 0 {
				bad("%s.%s: must not be negative (0 = no limit)", key, l.name)
			}
		}
		if q.SubmitRate < 0 {
			bad("%s.submit_rate: must not be negative (0 = submit.rate_per_queue)", key)
		}
		if out.SubmitRate == 0 {
			out.SubmitRate = c.Submit.RatePerQueue
		}
		total := cl.GPUTotal(q.Partition)
		g, cp := out.Guaranteed.Resolve(total), out.Cap.Resolve(total)
		if out.Cap.Set && cp < g {
			bad("%s.cap: %s (%d GPUs) is below guaranteed %s (%d GPUs)", key, out.Cap, cp, out.Guaranteed, g)
		}
		sh.Queues = append(sh.Queues, out)
	}
	// Parents: known, no cycles, children's guarantees within the
	// parent's.
	for i := range sh.Queues {
		q := &sh.Queues[i]
		if q.Parent == "" {
			continue
		}
		if q.Parent == q.Name {
			bad("queue %s: parent is itself", q.Name)
			continue
		}
		if byName[q.Parent] == nil {
			bad("queue %s: parent %q is not a queue (known: %s)", q.Name, q.Parent, strings.Join(sh.QueueNames(), ", "))
			continue
		}
		seen := map[string]bool{q.Name: true}
		for p := q.Parent; p != ""; p = byName[p].Parent {
			if seen[p] {
				bad("queue %s: parents form a cycle through %s", q.Name, p)
				break
			}
			seen[p] = true
			if byName[p] == nil {
				break
			}
		}
	}
	sum := map[string]int{}
	for i := range sh.Queues {
		q := &sh.Queues[i]
		sum[q.Parent] += q.Guaranteed.Resolve(cl.GPUTotal(q.Partition))
	}
	for i := range sh.Queues {
		p := &sh.Queues[i]
		g := p.Guaranteed.Resolve(cl.GPUTotal(p.Partition))
		if kids := sum[p.Name]; kids > g && p.Guaranteed.Set {
			bad("queue %s: its children guarantee %d GPUs, more than its own guaranteed %d", p.Name, kids, g)
		}
	}
	if total := cl.GPUTotal(""); total > 0 && sum[""] > total {
		bad("queues: top-level queues guarantee %d GPUs, more than the cluster's %d", sum[""], total)
	}
	cl.Sharing = sh
}
