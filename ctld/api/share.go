package api

import "time"

// PreemptMode is what happens to a job chosen as a preemption victim.
type PreemptMode string

// Preemption modes.
const (
	// PreemptRequeue sends the job's checkpoint signal, waits its grace
	// time (or its acknowledgement), then SIGTERM and SIGKILL, and
	// returns it to PENDING with its restart count raised.
	PreemptRequeue PreemptMode = "requeue"
	// PreemptCancel ends the job PREEMPTED after the same signal sequence
	// (debug jobs, --no-requeue jobs).
	PreemptCancel PreemptMode = "cancel"
	// PreemptSuspend stops the job with SIGSTOP and resumes it with
	// SIGCONT; only jobs without GPUs (a suspended GPU job keeps its GPU
	// memory).
	PreemptSuspend PreemptMode = "suspend"
	// PreemptNever marks a class whose jobs are never preempted.
	PreemptNever PreemptMode = "off"
)

// Default job classes (QOS names) shipped with every cluster.
const (
	QOSTraining  = "training"
	QOSInference = "inference"
	QOSBatch     = "batch"
	QOSDebug     = "debug"
)

// Levels bound job priority levels (--priority).
const (
	MinLevel = 1
	MaxLevel = 10
)

// Share is a job's state in the sharing machinery: queue accounting,
// aging and preemption. It is embedded in Job.
type Share struct {
	// Level is the job's effective priority level (1-10, its QOS default
	// when it asked for none), before aging.
	Level int `json:"level,omitempty"`
	// Starving is when the job passed the starvation threshold (zero
	// while it is not starving); each further threshold raises its aged
	// level by one.
	Starving time.Time `json:"starving,omitzero"`
	// StartedStarving is set on a running job that started while
	// Starving: priority preemption passes it over, or the stream of
	// higher-level jobs that aging lifted it past would take back at once
	// what it waited for (reclaim of borrowed GPUs still applies).
	StartedStarving bool `json:"started_starving,omitempty"`
	// Borrowing is set on a running job that started on GPUs its queue
	// borrowed beyond its guaranteed share; reclaim takes those first.
	Borrowing bool `json:"borrowing,omitempty"`
	// Preempting is set while a running job is being preempted: its
	// checkpoint signal was sent and its grace time runs.
	Preempting *Preempting `json:"preempting,omitempty"`
	// Preemptions counts how often the job was preempted.
	Preemptions int `json:"preemptions,omitempty"`
	// PrevNodes are the nodes of the job's last incarnation; a requeued
	// job prefers them (its node-local checkpoint may still be there).
	PrevNodes []string `json:"prev_nodes,omitempty"`
	// LastCheckpoint is when the job last acknowledged a checkpoint
	// (tide checkpoint-done or $TIDE_CHECKPOINT_ACK); victims are chosen
	// to lose the least run time since it (or since their start).
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
	// ExpectedStart is the backfill estimate of when a pending job starts
	// (squeue --start); zero when unknown.
	ExpectedStart time.Time `json:"expected_start,omitzero"`
}

// Preempting records one preemption in progress.
type Preempting struct {
	// By is the job the victim makes room for; Reclaim is true when the
	// victim's queue borrowed and the lender takes its share back.
	By      uint64      `json:"by"`
	Reclaim bool        `json:"reclaim,omitempty"`
	Mode    PreemptMode `json:"mode"`
	// Since is when the checkpoint signal was sent; Deadline when the
	// grace time ends and SIGTERM follows.
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
	// Acked is set when the job acknowledged its checkpoint.
	Acked bool   `json:"acked,omitempty"`
	Why   string `json:"why,omitempty"`
}

// QueueList is the answer of GET /api/v1/queues: every queue with its
// use, and every job class.
type QueueList struct {
	Queues []QueueStatus `json:"queues"`
	QOS    []QOSStatus   `json:"qos"`
	// DefaultQOS is the class of jobs that name none.
	DefaultQOS string `json:"default_qos"`
	// StarvationAge is the aging threshold in seconds.
	StarvationAge int64 `json:"starvation_age"`
}

// QueueStatus is one queue's configuration (GPU amounts resolved to
// whole GPUs) and current use.
type QueueStatus struct {
	Name   string   `json:"name"`
	Parent string   `json:"parent,omitempty"`
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Guaranteed and Cap are GPUs (Cap 0 = none); LendLimit and
	// BorrowLimit -1 mean unlimited.
	Guaranteed  int `json:"guaranteed"`
	Cap         int `json:"cap"`
	LendLimit   int `json:"lend_limit"`
	BorrowLimit int `json:"borrow_limit"`
	// UsedGPUs is what its running jobs hold; BorrowedGPUs the part of it
	// above Guaranteed; LentGPUs what other queues borrow of its share.
	UsedGPUs     int `json:"used_gpus"`
	BorrowedGPUs int `json:"borrowed_gpus"`
	LentGPUs     int `json:"lent_gpus"`
	Running      int `json:"running"`
	Pending      int `json:"pending"`
	// Per-user limits (0 = none).
	MaxRunningPerUser int `json:"max_running_per_user,omitempty"`
	MaxSubmitPerUser  int `json:"max_submit_per_user,omitempty"`
	MaxGPUsPerUser    int `json:"max_gpus_per_user,omitempty"`
	// SubmitRate is jobs per second accepted straight into the queue;
	// Buffered how many submissions wait in its buffer now.
	SubmitRate float64 `json:"submit_rate"`
	Buffered   int     `json:"buffered"`
}

// QOSStatus is one job class.
type QOSStatus struct {
	Name         string      `json:"name"`
	MinLevel     int         `json:"min_level"`
	MaxLevel     int         `json:"max_level"`
	DefaultLevel int         `json:"default_level"`
	Mode         PreemptMode `json:"mode"`
	PreemptGap   int         `json:"preempt_gap"`
	// GraceTime, MaxTime and MinRuntime are seconds (MaxTime 0 = none).
	GraceTime  int64 `json:"grace_time"`
	MaxTime    int64 `json:"max_time"`
	MinRuntime int64 `json:"min_runtime"`
	// Who may ask for the class with --qos besides operators: everybody
	// when Open, else the users, groups and accounts (queues) listed
	// (none: operators only).
	Open     bool     `json:"open"`
	Users    []string `json:"users,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Accounts []string `json:"accounts,omitempty"`
}

// API paths of the sharing machinery (see ctld/http.go):
//
//	GET  /api/v1/queues                → QueueList
//	POST /api/v1/jobs/{id}/checkpoint  → 204; the caller (the job's owner,
//	     or an operator) says the job finished a checkpoint: LastCheckpoint
//	     is set and a preemption in its grace time proceeds at once.
//
// A submission beyond a queue's buffer is answered 429 with class
// too_many_requests and a Retry-After header (whole seconds, at least 1).
const (
	PathQueues     = "/api/v1/queues"
	PathCheckpoint = "/api/v1/jobs/%d/checkpoint"
)
