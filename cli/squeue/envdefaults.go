package squeue

import (
	"context"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
)

// envDefaults applies the SQUEUE_* variables that stand in for a flag
// or list the command line did not give and that compile does not read
// itself: SQUEUE_ARRAY (-r, any non-empty value) and SQUEUE_QOS (-q).
// SQUEUE_ALL, SQUEUE_LOCAL, SQUEUE_SIBLING and SQUEUE_FEDERATION change
// nothing on Tide's one cluster, where every partition is visible.
func (o *Options) envDefaults() {
	if !o.Array && o.env("SQUEUE_ARRAY") != "" {
		o.Array = true
	}
	if o.QOS == "" {
		o.QOS = o.env("SQUEUE_QOS")
	}
}

// timeFormat is SLURM_TIME_FORMAT's format, relative to the local clock.
func (o *Options) timeFormat() slurmfmt.TimeFormat {
	loc, now := o.Loc, time.Now()
	if loc == nil {
		loc = time.Local
	}
	if o.Now != nil {
		now = o.Now()
	}
	return slurmfmt.ParseTimeFormat(o.env("SLURM_TIME_FORMAT"), now, loc)
}

// checkClusters refuses a -M/--clusters, or else a SLURM_CLUSTERS, that
// names another cluster than the controller's (Tide runs one); it asks
// the controller only when one of them is given.
func (o *Options) checkClusters(ctx context.Context, client cmdutil.API) error {
	list, fromEnv := o.Clusters, false
	if list == "" {
		list, fromEnv = o.env("SLURM_CLUSTERS"), true
	}
	if list == "" {
		return nil
	}
	info, err := client.Cluster(ctx)
	if err != nil {
		return err
	}
	return cmdutil.CheckClusters(list, info.Name, fromEnv)
}
