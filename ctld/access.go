package ctld

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Who a job belongs to and where it may go: the identity a submission
// runs as (sbatch --uid/--gid), and the access lists of partitions and
// job classes. Every check here runs in the controller, whatever the
// client did or skipped.

// jobOwner is the identity a submission's job runs as: the caller's, or
// with --uid/--gid (req.User, req.Group: names or numbers) another
// user's, which only root and operators may ask for, as in Slurm. The
// owner keeps the caller's operator rights (Slurm checks the invoking
// user's credentials for the partition). Operators other than root may
// not submit as root, nor with a group the user is not a member of: that
// would give them more than the user has.
func (s *Server) jobOwner(c caller, name, group string) (caller, error) {
	if name == "" && group == "" {
		return c, nil
	}
	o := c
	if name != "" {
		u, err := lookupUser(name)
		if err != nil {
			return caller{}, api.Invalid("Batch job submission failed: Invalid user id: %s", name)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		o.uid, o.gid, o.user = uint32(uid), uint32(gid), u.Username
	}
	if group != "" {
		g, err := lookupGroup(group)
		if err != nil {
			return caller{}, api.Invalid("Batch job submission failed: Invalid group id: %s", group)
		}
		gid, _ := strconv.ParseUint(g.Gid, 10, 32)
		o.gid = uint32(gid)
	}
	if o.uid == c.uid && o.gid == c.gid {
		return c, nil // asking to be oneself needs no rights
	}
	root := c.uid == 0
	switch {
	case !c.admin:
		return caller{}, api.Errorf(api.ErrPermissionDenied,
			"Access/permission denied: only root and operators may submit jobs as another user or group (--uid, --gid)")
	case o.uid == 0 && !root:
		return caller{}, api.Errorf(api.ErrPermissionDenied, "Access/permission denied: only root may submit jobs as root")
	case !root && !slices.Contains(s.userGroupNames(o.uid), s.users.group(o.gid)):
		return caller{}, api.Errorf(api.ErrPermissionDenied,
			"Access/permission denied: user %s is not a member of group %s (only root may choose any --gid)", o.user, group)
	}
	o.pid = 0
	return o, nil
}

// lookupUser finds a user by name, else by number.
func lookupUser(v string) (*user.User, error) {
	if u, err := user.Lookup(v); err == nil {
		return u, nil
	}
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return nil, fmt.Errorf("no user %q", v)
	}
	return user.LookupId(v)
}

// lookupGroup finds a group by name, else by number.
func lookupGroup(v string) (*user.Group, error) {
	if g, err := user.LookupGroup(v); err == nil {
		return g, nil
	}
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return nil, fmt.Errorf("no group %q", v)
	}
	return user.LookupGroupId(v)
}

// checkPartitionAccess refuses a job its partition's access lists do
// not admit, with Slurm's words: AllowGroups (operators pass, as root
// does in Slurm), AllowAccounts/DenyAccounts and AllowQos/DenyQos (for
// everybody: they say which jobs the partition's nodes are for). The
// job's account and class are final (shareSubmit filled them).
func (s *Server) checkPartitionAccess(o caller, part *api.Partition, account, qos string) error {
	a := &part.Access
	if !o.admin && !a.GroupOK(s.groupsOf(o)) {
		return api.Errorf(api.ErrPermissionDenied, "User's group not permitted to use this partition (partition %s allows groups %s; user %s)",
			part.Name, api.FormatAccessList(a.AllowGroups), o.user)
	}
	if !a.AccountOK(account) {
		return api.Errorf(api.ErrPermissionDenied, "Invalid account or account/partition combination specified (partition %s does not take jobs of account %q)",
			part.Name, account)
	}
	if qos == "" {
		qos = s.sharing().DefaultQOS
	}
	if !a.QOSOK(qos) {
		return api.Errorf(api.ErrPermissionDenied, "Invalid qos specification (partition %s does not take jobs of qos %s)", part.Name, qos)
	}
	return nil
}

// checkClassAccess refuses a class the owner may not use (operators may
// use every class). Called with a class shareSubmit found.
func (s *Server) checkClassAccess(o caller, qos, account string) error {
	a := s.sharing().QOSAccess[qos]
	if o.admin || a.Allows(o.user, s.groupsOf(o), account) {
		return nil
	}
	return api.Errorf(api.ErrPermissionDenied, "Invalid qos specification: user %s may not use qos %s (open to %s)", o.user, qos, a.Grants())
}

// ownerOf is j's owner with the caller's operator rights: who an update
// by c is checked for.
func ownerOf(j *api.Job, c caller) caller {
	return caller{uid: j.UserID, gid: j.GroupID, user: j.User, admin: c.admin, known: true}
}

// checkMove checks an update that puts pending job j in another
// partition or queue (account) as a submission there would be checked:
// the queue must exist and admit the owner, the job's class must be open
// to the owner in that queue, the partition's access lists must admit
// it, and the job must fit the partition's nodes. Called with mu held.
func (s *Server) checkMove(c caller, j *api.Job, partition, account string) error {
	names := api.PartitionNames(partition)
	if len(names) == 0 {
		return fmt.Errorf("Invalid partition name specified")
	}
	for _, name := range names {
		if _, ok := s.partitions[name]; !ok {
			return fmt.Errorf("Invalid partition name specified")
		}
	}
	o := ownerOf(j, c)
	sh := s.sharing()
	if len(sh.Queues) > 0 && account != j.Account {
		q := sh.Queue(account)
		if q == nil {
			return fmt.Errorf("Invalid account or account/partition combination specified: %s is not a queue (valid: %s)",
				account, strings.Join(sh.QueueNames(), ", "))
		}
		if !o.admin && !q.Member(o.user, s.groupsOf(o)) {
			return fmt.Errorf("Invalid account or account/partition combination specified: user %s may not submit to queue %s (members: %s)",
				o.user, q.Name, q.Members())
		}
	}
	if sh.Configured && j.QOS != "" {
		if err := s.checkClassAccess(o, j.QOS, account); err != nil {
			return err
		}
	}
	// Every partition of a list (-p a,b) must take the job, and one of
	// them must be able to run it.
	var infeasible error
	feasible := partition == j.ReqPartition()
	for _, name := range names {
		part := s.partitions[name]
		if err := s.checkPartitionAccess(o, part, account, j.QOS); err != nil {
			return err
		}
		if feasible {
			continue
		}
		if ok, why := s.partCapacityLocked(part).feasible.Check(&j.JobSpec); ok {
			feasible = true
		} else if infeasible == nil {
			infeasible = fmt.Errorf("Requested node configuration is not available (%s)", why)
		}
	}
	if !feasible {
		return infeasible
	}
	return nil
}
