package config

import (
	"slices"
	"strings"
)

// The words of private_data, Slurm's PrivateData values that Tide
// implements (ctld/privacy.go applies them).
const (
	PrivateEvents = "events"
	PrivateJobs   = "jobs"
	PrivateNodes  = "nodes"
	PrivateUsage  = "usage"
)

// privateWords lists the valid words in the order Slurm prints them.
var privateWords = []string{PrivateEvents, PrivateJobs, PrivateNodes, PrivateUsage}

// PrivateData is private_data validated: what regular users may not see
// of other users' work. Root, the controller's own user and operators
// always see everything.
type PrivateData struct {
	// Jobs: listings (squeue, sprio, scontrol show job, sacct) hold only
	// the caller's own jobs and steps; another user's job is answered
	// as if it did not exist.
	Jobs bool
	// Usage: accounting (sacct, its steps) holds only the caller's own
	// jobs, and the queue listing only the queues the caller may submit
	// to (Slurm's sshare shows a user only their own associations).
	Usage bool
	// Nodes: the node listing (sinfo, scontrol show node) is for
	// operators.
	Nodes bool
	// Events: the trail of another user's job (tide events) is refused.
	Events bool
}

// Any reports whether any word is set.
func (p PrivateData) Any() bool { return p.Jobs || p.Usage || p.Nodes || p.Events }

// String is Slurm's PrivateData as `scontrol show config` prints it:
// the words in Slurm's order, comma-separated, or "none".
func (p PrivateData) String() string {
	var on []string
	for _, w := range privateWords {
		if *p.flag(w) {
			on = append(on, w)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// flag is the field of word w (a valid word).
func (p *PrivateData) flag(w string) *bool {
	switch w {
	case PrivateEvents:
		return &p.Events
	case PrivateJobs:
		return &p.Jobs
	case PrivateNodes:
		return &p.Nodes
	default:
		return &p.Usage
	}
}

// ParsePrivateData reads private_data's words (case does not matter, as
// in slurm.conf; a word may also be a comma-separated list, as
// TIDECTLD_PRIVATE_DATA=jobs,usage gives it). Unknown words are an
// error naming the valid ones; Slurm's words that Tide does not
// implement (accounts, partitions, reservations, users, cloud) are
// unknown too, so that a site never believes them applied.
func ParsePrivateData(words []string) (PrivateData, []string) {
	var p PrivateData
	var bad []string
	for _, item := range words {
		for w := range strings.SplitSeq(item, ",") {
			w = strings.ToLower(strings.TrimSpace(w))
			if !slices.Contains(privateWords, w) {
				bad = append(bad, w)
				continue
			}
			*p.flag(w) = true
		}
	}
	return p, bad
}

// validatePrivacy sets cl.Private from private_data.
func (c Config) validatePrivacy(cl *Cluster, bad func(string, ...any)) {
	p, unknown := ParsePrivateData(c.PrivateData)
	for _, w := range unknown {
		bad("private_data: %q is not a word Tide knows (valid: %s)", w, strings.Join(privateWords, ", "))
	}
	cl.Private = p
}
