package api

import "time"

// PathPriority is the priority listing (sprio): each visible pending
// job's multifactor factors under policy tide. It takes the job list's
// query (JobFilter.Values); only pending jobs are answered.
const PathPriority = "/api/v1/jobs/priority"

// PriorityList answers PathPriority.
type PriorityList struct {
	// Now is the instant the factors were computed at.
	Now time.Time `json:"now"`
	// Policy is the controller's scheduler policy.
	Policy string `json:"policy"`
	// Weights are the multifactor weights in force; nil when the policy
	// is not tide (no multifactor priority: Jobs and Accounts are then
	// empty).
	Weights *PriorityWeights `json:"weights"`
	// Orders reports whether the multifactor priority orders the pass.
	// It does not in share mode (queues or job classes configured):
	// the queues' rules and levels decide, and the factors are shown
	// for information.
	Orders bool `json:"orders"`
	// Jobs are the visible pending jobs, by id.
	Jobs []JobPriority `json:"jobs"`
	// Accounts are the accounts' decayed usage that the fair-share
	// factor reads, by name (under private_data the caller's own).
	Accounts []AccountUsage `json:"accounts"`
}

// PriorityWeights are the multifactor weights and scales (the
// scheduler.priority_* settings).
type PriorityWeights struct {
	Age       float64 `json:"age"`
	Length    float64 `json:"length"`
	JobSize   float64 `json:"job_size"`
	Fairshare float64 `json:"fairshare"`
	// MaxAge is the wait at which the age factor reaches 1, seconds.
	MaxAge int64 `json:"max_age"`
	// LengthRef is the time limit whose length factor is 0, seconds.
	LengthRef int64 `json:"length_ref"`
	// JobSizeRef is the GPU count whose size factor is 0.
	JobSizeRef int `json:"job_size_ref"`
}

// Sum is the highest priority the weights allow with every factor in
// [0, 1] (each at 1 where its weight is positive, 0 where negative;
// nice 0): sprio -n divides the priority by it. An age past MaxAge
// (which grows on when the controller says so) can exceed it.
func (w *PriorityWeights) Sum() float64 {
	return max(0, w.Age) + max(0, w.Length) + max(0, w.JobSize) + max(0, w.Fairshare)
}

// JobPriority is one pending job's factors, each in [0, 1], and the
// priority they sum to: Σ weight × factor − nice.
type JobPriority struct {
	JobID     uint64  `json:"job_id"`
	Partition string  `json:"partition"`
	UserID    uint32  `json:"user_id"`
	User      string  `json:"user,omitempty"`
	Account   string  `json:"account,omitempty"`
	Nice      int     `json:"nice"`
	Age       float64 `json:"age"`
	Length    float64 `json:"length"`
	JobSize   float64 `json:"job_size"`
	Fairshare float64 `json:"fairshare"`
	Priority  float64 `json:"priority"`
}

// AccountUsage is one account's decayed GPU-time.
type AccountUsage struct {
	Account string `json:"account"`
	// Usage is GPU-seconds decayed by scheduler.priority_decay_half_life
	// to the last scheduling pass.
	Usage float64 `json:"usage"`
	// Share is Usage over all accounts' usage (0 when none).
	Share float64 `json:"share"`
}
