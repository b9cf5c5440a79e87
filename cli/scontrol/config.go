package scontrol

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tide-hpc/tide/internal/termsafe"
)

// configOrder is the order Slurm 22.05's scontrol show config prints its
// keys in (slurm_print_ctl_conf): tools and eyes find keys where Slurm
// puts them. Keys Tide adds (TideSocket, ...) follow, sorted.
var configOrder = []string{
	"AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageHost",
	"AccountingStorageExternalHost", "AccountingStorageParameters", "AccountingStoragePort",
	"AccountingStorageTRES", "AccountingStorageType", "AccountingStorageUser", "AccountingStoreFlags",
	"AcctGatherEnergyType", "AcctGatherFilesystemType", "AcctGatherInterconnectType",
	"AcctGatherNodeFreq", "AcctGatherProfileType", "AllowSpecResourcesUsage", "AuthAltTypes",
	"AuthAltParameters", "AuthInfo", "AuthType", "BatchStartTimeout", "BcastExclude",
	"BcastParameters", "BOOT_TIME", "BurstBufferType", "CliFilterPlugins", "ClusterName",
	"CommunicationParameters", "CompleteWait", "CoreSpecPlugin", "CpuFreqDef", "CpuFreqGovernors",
	"CredType", "DebugFlags", "DefMemPerCPU", "DefMemPerNode", "DependencyParameters",
	"DisableRootJobs", "EioTimeout", "EnforcePartLimits", "Epilog", "EpilogMsgTime", "EpilogSlurmctld",
	"ExtSensorsType", "ExtSensorsFreq", "FederationParameters", "FirstJobId", "GetEnvTimeout",
	"GresTypes", "GpuFreqDef", "GroupUpdateForce", "GroupUpdateTime", "HASH_VAL",
	"HealthCheckInterval", "HealthCheckNodeState", "HealthCheckProgram", "InactiveLimit",
	"InteractiveStepOptions", "JobAcctGatherFrequency", "JobAcctGatherType", "JobAcctGatherParams",
	"JobCompHost", "JobCompLoc", "JobCompPort", "JobCompType", "JobCompUser", "JobContainerType",
	"JobCredentialPrivateKey", "JobCredentialPublicCertificate", "JobDefaults", "JobFileAppend",
	"JobRequeue", "JobSubmitPlugins", "KillOnBadExit", "KillWait", "LaunchParameters", "LaunchType",
	"Licenses", "LogTimeFormat", "MailDomain", "MailProg", "MaxArraySize", "MaxDBDMsgs", "MaxJobCount",
	"MaxJobId", "MaxMemPerNode", "MaxNodeCount", "MaxStepCount", "MaxTasksPerNode", "MCSPlugin",
	"MCSParameters", "MessageTimeout", "MinJobAge", "MpiDefault", "MpiParams", "MULTIPLE_SLURMD",
	"NEXT_JOB_ID", "NodeFeaturesPlugins", "OverTimeLimit", "PluginDir", "PlugStackConfig",
	"PowerParameters", "PowerPlugin", "PreemptMode", "PreemptType", "PreemptExemptTime",
	"PrEpParameters", "PrEpPlugins", "PriorityParameters", "PrioritySiteFactorParameters",
	"PrioritySiteFactorPlugin", "PriorityType", "PrivateData", "ProctrackType", "Prolog",
	"PrologEpilogTimeout", "PrologSlurmctld", "PrologFlags", "PropagatePrioProcess",
	"PropagateResourceLimits", "PropagateResourceLimitsExcept", "RebootProgram", "ReconfigFlags",
	"RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram", "ResumeRate",
	"ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog", "ReturnToService", "RoutePlugin",
	"SchedulerParameters", "SchedulerTimeSlice", "SchedulerType", "ScronParameters", "SelectType",
	"SelectTypeParameters", "SlurmUser", "SlurmctldAddr", "SlurmctldDebug", "SlurmctldHost[0]",
	"SlurmctldLogFile", "SlurmctldPort", "SlurmctldSyslogDebug", "SlurmctldPrimaryOffProg",
	"SlurmctldPrimaryOnProg", "SlurmctldTimeout", "SlurmctldParameters", "SlurmdDebug",
	"SlurmdLogFile", "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir",
	"SlurmdSyslogDebug", "SlurmdTimeout", "SlurmdUser", "SlurmSchedLogFile", "SlurmSchedLogLevel",
	"SlurmctldPidFile", "SlurmctldPlugstack", "SLURM_CONF", "SLURM_VERSION", "SrunEpilog",
	"SrunPortRange", "SrunProlog", "StateSaveLocation", "SuspendExcNodes", "SuspendExcParts",
	"SuspendProgram", "SuspendRate", "SuspendTime", "SuspendTimeout", "SwitchParameters", "SwitchType",
	"TaskEpilog", "TaskPlugin", "TaskPluginParam", "TaskProlog", "TCPTimeout", "TmpFS",
	"TopologyParam", "TopologyPlugin", "TrackWCKey", "TreeWidth", "UsePam", "UnkillableStepProgram",
	"UnkillableStepTimeout", "VSizeFactor", "WaitTime", "X11Parameters",
}

func (o *Options) showConfig(ctx context.Context) error {
	c, err := o.API()
	if err != nil {
		return err
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_ctl_conf error: %w", err)
	}
	cfg := make(map[string]string, len(info.Config)+1)
	for k, v := range info.Config {
		cfg[k] = v
	}
	if _, ok := cfg["BOOT_TIME"]; !ok && !info.StartTime.IsZero() {
		// When the controller started, as Slurm's BOOT_TIME.
		cfg["BOOT_TIME"] = fmtTime(info.StartTime, o.Loc)
	}
	keys := make([]string, 0, len(cfg))
	seen := map[string]bool{}
	for _, k := range configOrder {
		if _, ok := cfg[k]; ok {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	var rest []string
	for k := range cfg {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Slice(rest, func(i, j int) bool {
		a, b := strings.ToLower(rest[i]), strings.ToLower(rest[j])
		if a != b {
			return a < b
		}
		return rest[i] < rest[j]
	})
	keys = append(keys, rest...)
	var b strings.Builder
	fmt.Fprintf(&b, "Configuration data as of %s\n", fmtTime(info.Now, o.Loc))
	for _, k := range keys {
		// Escaped: partition names and paths are configured text.
		fmt.Fprintf(&b, "%-23s = %s\n", termsafe.Escape(k), termsafe.Escape(cfg[k]))
	}
	if p, ok := severalControllers(c); ok { // ping.go: every controller, as ping
		b.WriteString("\n" + pingLines(pingControllers(ctx, p)))
	} else {
		fmt.Fprintf(&b, "\nSlurmctld(primary) at %s is UP\n", termsafe.Escape(ctldHost(cfg, info.Name)))
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}
