package config

import (
	"slices"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// All is Slurm's word for "everybody" in an access list
// (AllowGroups=ALL).
const All = "ALL"

// accessList trims an access list as written; one that contains ALL
// (any case) means everybody and comes back nil, as does an empty one.
func accessList(l []string) []string {
	var out []string
	for _, v := range l {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
		case strings.EqualFold(v, All):
			return nil
		default:
			out = append(out, v)
		}
	}
	return out
}

// partitionAccess validates a partition's allow and deny lists.
func partitionAccess(p PartitionConfig, bad func(string, ...any)) api.PartitionAccess {
	a := api.PartitionAccess{
		AllowGroups:   accessList(p.AllowGroups),
		AllowAccounts: accessList(p.AllowAccounts),
		AllowQOS:      accessList(p.AllowQOS),
		DenyAccounts:  accessList(p.DenyAccounts),
		DenyQOS:       accessList(p.DenyQOS),
	}
	// Slurm takes one of each pair; both would leave the reader
	// guessing which wins.
	if len(a.AllowAccounts) > 0 && len(a.DenyAccounts) > 0 {
		bad("partition %s: give allow_accounts or deny_accounts, not both", p.Name)
	}
	if len(a.AllowQOS) > 0 && len(a.DenyQOS) > 0 {
		bad("partition %s: give allow_qos or deny_qos, not both", p.Name)
	}
	return a
}

// ClassAccess says who may use a job class (qos): everybody, or the
// users, the members of the groups and the jobs of the accounts
// (queues) listed. Operators may use every class.
type ClassAccess struct {
	All                     bool
	Users, Groups, Accounts []string
}

// Allows reports whether user (with groups), submitting to account, may
// use the class.
func (a *ClassAccess) Allows(user string, groups []string, account string) bool {
	if a == nil || a.All || slices.Contains(a.Users, user) || account != "" && slices.Contains(a.Accounts, account) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(a.Groups, g) {
			return true
		}
	}
	return false
}

// Grants describes who may use the class, for error messages and tide
// queues.
func (a *ClassAccess) Grants() string {
	if a == nil || a.All {
		return "everyone"
	}
	var parts []string
	for _, l := range []struct {
		what string
		v    []string
	}{{"users", a.Users}, {"groups", a.Groups}, {"queues", a.Accounts}} {
		if len(l.v) > 0 {
			parts = append(parts, l.what+" "+strings.Join(l.v, ","))
		}
	}
	if len(parts) == 0 {
		return "operators only"
	}
	return strings.Join(parts, "; ")
}

// classAccess is the access of a class: what its entry grants, else
// everybody, except for inference, whose jobs are never preempted: a
// class nobody gets unless the configuration grants it.
func classAccess(name string, q *QOSConfig) *ClassAccess {
	a := &ClassAccess{All: name != api.QOSInference}
	if q == nil || len(q.Users)+len(q.Groups)+len(q.Accounts) == 0 {
		return a
	}
	users, groups, accounts := accessList(q.Users), accessList(q.Groups), accessList(q.Accounts)
	if len(users) < len(nonEmpty(q.Users)) || len(groups) < len(nonEmpty(q.Groups)) || len(accounts) < len(nonEmpty(q.Accounts)) {
		// One of the lists said ALL.
		return &ClassAccess{All: true}
	}
	return &ClassAccess{Users: users, Groups: groups, Accounts: accounts}
}

// nonEmpty drops blank entries.
func nonEmpty(l []string) []string {
	var out []string
	for _, v := range l {
		if strings.TrimSpace(v) != "" {
			out = append(out, v)
		}
	}
	return out
}
