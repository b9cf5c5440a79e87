package ctld

import (
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// Partition lists (-p a,b, issue 22): the job is eligible in each of the
// partitions and runs in the first, in the order given, where it can
// start (ctld/sched/partlist.go). Pending, its Partition is the list
// ("a,b", what squeue shows); at its start Partition becomes the one it
// runs in and the list moves to PartitionList, so that a requeue makes
// it eligible in all of them again.

// reqPartitions resolves spec's partition request: the default
// partition when none is named, else the named partitions, each of which
// must exist, in the order given without repeats. spec.Partition is
// rewritten to that list.
func (s *Server) reqPartitions(spec *api.JobSpec) ([]*api.Partition, error) {
	if strings.TrimSpace(spec.Partition) == "" {
		spec.Partition = s.cl.DefaultPart
	}
	names := api.PartitionNames(spec.Partition)
	if len(names) == 0 {
		return nil, api.Invalid("invalid partition specified: %s", spec.Partition)
	}
	parts := make([]*api.Partition, len(names))
	for i, name := range names {
		p, ok := s.partitions[name]
		if !ok {
			return nil, api.Invalid("invalid partition specified: %s", name)
		}
		parts[i] = p
	}
	spec.Partition = strings.Join(names, ",")
	return parts, nil
}

// validateInPartitions checks spec against the partitions it may run
// in. A job of one partition gets that partition's defaults and
// refusals. A job of several is accepted when one of them could run it:
// the first that can gives its defaults (CPUs and memory per GPU, the
// communication pattern), except the time limit, which each partition's
// default sets when the job starts there; when none can, the first
// partition's refusal is the answer.
func (s *Server) validateInPartitions(spec *api.JobSpec, parts []*api.Partition) error {
	if len(parts) == 1 {
		return s.validateInPartition(spec, parts[0])
	}
	var first error
	for _, part := range parts {
		try := *spec
		if err := s.validateInPartition(&try, part); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		try.TimeLimit = spec.TimeLimit
		*spec = try
		return nil
	}
	return first
}

// checkPartitionsAccess applies checkPartitionAccess to every partition
// a submission names: the user named each, so each must take the job.
func (s *Server) checkPartitionsAccess(o caller, spec *api.JobSpec) error {
	for _, name := range api.PartitionNames(spec.Partition) {
		if err := s.checkPartitionAccess(o, s.partitions[name], spec.Account, spec.QOS); err != nil {
			return err
		}
	}
	return nil
}

// startPartition records where a job of a partition list started: the
// list stays in PartitionList, Partition names the one it runs in.
// Called with mu held, before the job's start is committed.
func startPartition(j *api.Job, st *sched.Start) {
	if st.Partition == "" || st.Partition == j.Partition && j.PartitionList == "" {
		return
	}
	if strings.Contains(j.Partition, ",") {
		j.PartitionList = j.Partition
	}
	j.Partition = st.Partition
}
