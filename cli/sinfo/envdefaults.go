package sinfo

import (
	"context"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
)

// sinfo's environment: SINFO_FORMAT, SINFO_PARTITION and SINFO_SORT are
// read where their options are (sinfo.go); SINFO_ALL, SINFO_LOCAL and
// SINFO_FEDERATION change nothing on Tide's one cluster, where every
// partition is visible; SLURM_TIME_FORMAT and SLURM_CLUSTERS are here.

// timeFormat is SLURM_TIME_FORMAT's format, relative to the local clock.
func (o *Options) timeFormat(loc *time.Location) slurmfmt.TimeFormat {
	now := time.Now()
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
