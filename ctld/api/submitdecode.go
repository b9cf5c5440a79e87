package api

import (
	"github.com/tide-hpc/tide/internal/jsonfast"
)

// DecodeSubmitRequest decodes data into r exactly as a json.Decoder with
// DisallowUnknownFields decodes its first value (what the controller
// asks of a request body), r being zero.
//
// Every submission is decoded on its way to the commit sbatch waits
// for, and encoding/json's reflection over JobSpec's fifty fields was a
// tenth of the controller's CPU in a storm of small jobs. So what
// AppendJSON writes (and any JSON that spells the fields the same way)
// is read by hand; anything else — a key in another case, an unknown
// key, a null, a number with a fraction or out of range, malformed
// input — goes to encoding/json from the start, for its exact result
// and error. Strings with escapes or invalid UTF-8, the begin time, the
// signal and the container mounts are decoded by encoding/json one by
// one.
func DecodeSubmitRequest(data []byte, r *SubmitRequest) error {
	return jsonfast.Decode(data, r, jsonfast.StreamStrict, func(d *jsonfast.Decoder, out *SubmitRequest) bool {
		return submitDecoder{d}.submitRequest(out)
	})
}

// submitDecoder reads a SubmitRequest field by field.
type submitDecoder struct{ *jsonfast.Decoder }

func (d submitDecoder) submitRequest(r *SubmitRequest) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "spec":
			return d.jobSpec(&r.Spec)
		case "test_only":
			return d.Bool(&r.TestOnly)
		case "user":
			return d.String(&r.User)
		case "group":
			return d.String(&r.Group)
		case "token":
			return d.String(&r.Token)
		}
		return false
	})
}

// jobSpec reads JobSpec's fields by their JSON names (see AppendJSON).
func (d submitDecoder) jobSpec(s *JobSpec) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return d.String(&s.Name)
		case "account":
			return d.String(&s.Account)
		case "partition":
			return d.String(&s.Partition)
		case "qos":
			return d.String(&s.QOS)
		case "comment":
			return d.String(&s.Comment)
		case "script":
			return d.String(&s.Script)
		case "script_args":
			return d.Strings(&s.ScriptArgs)
		case "work_dir":
			return d.String(&s.WorkDir)
		case "submit_dir":
			return d.String(&s.SubmitDir)
		case "submit_host":
			return d.String(&s.SubmitHost)
		case "environment":
			return d.Strings(&s.Environment)
		case "nodes":
			return d.Int(&s.Nodes)
		case "max_nodes":
			return d.Int(&s.MaxNodes)
		case "tasks":
			return d.Int(&s.Tasks)
		case "tasks_per_node":
			return d.Int(&s.TasksPerNode)
		case "cpus_per_task":
			return d.Int(&s.CPUsPerTask)
		case "mem_per_node_mb":
			return d.Int64(&s.MemPerNodeMB)
		case "mem_per_cpu_mb":
			return d.Int64(&s.MemPerCPUMB)
		case "mem_per_gpu_mb":
			return d.Int64(&s.MemPerGPUMB)
		case "cpus_per_gpu":
			return d.Int(&s.CPUsPerGPU)
		case "gpus":
			return d.Int(&s.GPUs)
		case "gpus_per_node":
			return d.Int(&s.GPUsPerNode)
		case "gpus_per_task":
			return d.Int(&s.GPUsPerTask)
		case "gpu_type":
			return d.String(&s.GPUType)
		case "gpu_mem_mb":
			return d.Int64(&s.GPUMemMB)
		case "gpu_compute_pct":
			return d.Int(&s.GPUComputePct)
		case "gpu_shards":
			return d.Int(&s.GPUShards)
		case "exclusive":
			return d.Bool(&s.Exclusive)
		case "switches":
			return d.Int(&s.Switches)
		case "comm":
			return d.String(&s.Comm)
		case "switch_wait":
			return d.Int64(&s.SwitchWait)
		case "node_list":
			return d.Strings(&s.NodeList)
		case "exclude":
			return d.Strings(&s.Exclude)
		case "constraint":
			return d.String(&s.Constraint)
		case "min_cpus":
			return d.Int(&s.MinCPUs)
		case "tmp_disk_mb":
			return d.Int64(&s.TmpDiskMB)
		case "overcommit":
			return d.Bool(&s.Overcommit)
		case "time_limit":
			return d.Int64(&s.TimeLimit)
		case "time_min":
			return d.Int64(&s.TimeMin)
		case "begin_time":
			return d.Value(&s.BeginTime, true)
		case "hold":
			return d.Bool(&s.Hold)
		case "nice":
			return d.Int(&s.Nice)
		case "priority":
			return d.Uint32(&s.Priority)
		case "stdout":
			return d.String(&s.Stdout)
		case "stderr":
			return d.String(&s.Stderr)
		case "stdin":
			return d.String(&s.Stdin)
		case "open_mode":
			return d.String(&s.OpenMode)
		case "requeue":
			var v bool
			if !d.Bool(&v) {
				return false
			}
			s.Requeue = &v
			return true
		case "signal":
			// Into the spec already there, as encoding/json merges a
			// repeated key's object into the first.
			if s.Signal == nil {
				s.Signal = new(SignalSpec)
			}
			return d.Value(s.Signal, true)
		case "dependency":
			return d.String(&s.Dependency)
		case "kill_invalid_dep":
			return d.Bool(&s.KillInvalidDep)
		case "array":
			return d.String(&s.Array)
		case "mail_type":
			return d.String(&s.MailType)
		case "mail_user":
			return d.String(&s.MailUser)
		case "allocation":
			return d.Bool(&s.Allocation)
		case "container_image":
			return d.String(&s.ContainerImage)
		case "container_mounts":
			return d.Value(&s.ContainerMounts, true)
		}
		return false
	})
}
