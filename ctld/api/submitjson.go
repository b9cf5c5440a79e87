package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends to b the bytes json.Marshal(r) produces and returns
// the extended slice. It exists for sbatch, a short-lived process run
// thousands of times in a row: encoding/json spends about 0.12 ms of
// such a run building its reflection caches for SubmitRequest before it
// writes a byte, which a hand-written encoder does not need.
//
// It fails exactly where json.Marshal does, which for these types is a
// time that RFC 3339 cannot spell (a year outside [0,9999] or a zone
// offset of a day or more). It then returns b at its original length
// (nothing appended) and the *json.MarshalerError json.Marshal returns.
//
// SubmitRequest does not implement json.Marshaler with this: the
// controller encodes these types with encoding/json as before, and this
// is only a fast path for the client. Any change to SubmitRequest,
// JobSpec, SignalSpec or ContainerMount must be mirrored here;
// TestSubmitJSONMatchesEncodingJSON fills every field and fails until it
// is. The match is with the default encoding/json; built with
// GOEXPERIMENT=jsonv2, json.Marshal writes invalid UTF-8 as a raw U+FFFD
// rather than \ufffd, and that test says so.
func (r *SubmitRequest) AppendJSON(b []byte) ([]byte, error) {
	if r == nil {
		return append(b, "null"...), nil
	}
	n0 := len(b)
	b = slices.Grow(b, submitJSONSizeHint(&r.Spec))
	b = append(b, `{"spec":`...)
	b, err := appendJobSpecJSON(b, &r.Spec)
	if err != nil {
		return b[:n0], err
	}
	if r.TestOnly {
		b = append(b, `,"test_only":true`...)
	}
	b = appendStringField(b, `,"user":`, r.User)
	b = appendStringField(b, `,"group":`, r.Group)
	b = appendStringField(b, `,"token":`, r.Token)
	return append(b, '}'), nil
}

// submitJSONSizeHint guesses the encoded size of s from its bulkiest
// fields, so that one allocation usually holds it all: the script and
// the environment are most of a submission.
func submitJSONSizeHint(s *JobSpec) int {
	n := 512 + len(s.Script) + len(s.WorkDir) + len(s.SubmitDir)
	for _, e := range s.Environment {
		n += len(e) + 3
	}
	return n + n/16
}

// appendJobSpecJSON writes s in JobSpec's declaration order, which is
// the order encoding/json uses.
func appendJobSpecJSON(b []byte, s *JobSpec) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, s.Name)
	b = appendStringField(b, `,"account":`, s.Account)
	b = appendStringField(b, `,"partition":`, s.Partition)
	b = appendStringField(b, `,"qos":`, s.QOS)
	b = appendStringField(b, `,"comment":`, s.Comment)
	b = appendStringField(b, `,"script":`, s.Script)
	b = appendStringsField(b, `,"script_args":`, s.ScriptArgs)
	b = append(b, `,"work_dir":`...)
	b = appendJSONString(b, s.WorkDir)
	b = appendStringField(b, `,"submit_dir":`, s.SubmitDir)
	b = appendStringField(b, `,"submit_host":`, s.SubmitHost)
	b = appendStringsField(b, `,"environment":`, s.Environment)

	b = appendIntField(b, `,"nodes":`, int64(s.Nodes))
	b = appendIntField(b, `,"max_nodes":`, int64(s.MaxNodes))
	b = appendIntField(b, `,"tasks":`, int64(s.Tasks))
	b = appendIntField(b, `,"tasks_per_node":`, int64(s.TasksPerNode))
	b = appendIntField(b, `,"cpus_per_task":`, int64(s.CPUsPerTask))
	b = appendIntField(b, `,"mem_per_node_mb":`, s.MemPerNodeMB)
	b = appendIntField(b, `,"mem_per_cpu_mb":`, s.MemPerCPUMB)
	b = appendIntField(b, `,"mem_per_gpu_mb":`, s.MemPerGPUMB)
	b = appendIntField(b, `,"cpus_per_gpu":`, int64(s.CPUsPerGPU))
	b = appendIntField(b, `,"gpus":`, int64(s.GPUs))
	b = appendIntField(b, `,"gpus_per_node":`, int64(s.GPUsPerNode))
	b = appendIntField(b, `,"gpus_per_task":`, int64(s.GPUsPerTask))
	b = appendStringField(b, `,"gpu_type":`, s.GPUType)
	b = appendIntField(b, `,"gpu_mem_mb":`, s.GPUMemMB)
	b = appendIntField(b, `,"gpu_compute_pct":`, int64(s.GPUComputePct))
	b = appendIntField(b, `,"gpu_shards":`, int64(s.GPUShards))
	b = appendBoolField(b, `,"exclusive":true`, s.Exclusive)
	b = appendIntField(b, `,"switches":`, int64(s.Switches))
	b = appendStringField(b, `,"comm":`, s.Comm)
	b = appendIntField(b, `,"switch_wait":`, s.SwitchWait)
	b = appendStringsField(b, `,"node_list":`, s.NodeList)
	b = appendStringsField(b, `,"exclude":`, s.Exclude)
	b = appendStringField(b, `,"constraint":`, s.Constraint)
	b = appendIntField(b, `,"min_cpus":`, int64(s.MinCPUs))
	b = appendIntField(b, `,"tmp_disk_mb":`, s.TmpDiskMB)
	b = appendBoolField(b, `,"overcommit":true`, s.Overcommit)

	b = appendIntField(b, `,"time_limit":`, s.TimeLimit)
	b = appendIntField(b, `,"time_min":`, s.TimeMin)
	if !s.BeginTime.IsZero() {
		var err error
		b = append(b, `,"begin_time":`...)
		if b, err = appendJSONTime(b, s.BeginTime); err != nil {
			return b, err
		}
	}
	b = appendBoolField(b, `,"hold":true`, s.Hold)
	b = appendIntField(b, `,"nice":`, int64(s.Nice))
	if s.Priority != 0 {
		b = append(b, `,"priority":`...)
		b = strconv.AppendUint(b, uint64(s.Priority), 10)
	}

	b = appendStringField(b, `,"stdout":`, s.Stdout)
	b = appendStringField(b, `,"stderr":`, s.Stderr)
	b = appendStringField(b, `,"stdin":`, s.Stdin)
	b = appendStringField(b, `,"open_mode":`, s.OpenMode)

	if s.Requeue != nil {
		b = append(b, `,"requeue":`...)
		b = strconv.AppendBool(b, *s.Requeue)
	}
	if s.Signal != nil {
		b = append(b, `,"signal":`...)
		b = appendSignalSpecJSON(b, s.Signal)
	}

	b = appendStringField(b, `,"dependency":`, s.Dependency)
	b = appendBoolField(b, `,"kill_invalid_dep":true`, s.KillInvalidDep)
	b = appendStringField(b, `,"array":`, s.Array)
	b = appendStringField(b, `,"mail_type":`, s.MailType)
	b = appendStringField(b, `,"mail_user":`, s.MailUser)

	b = appendBoolField(b, `,"allocation":true`, s.Allocation)

	b = appendStringField(b, `,"container_image":`, s.ContainerImage)
	b = appendContainerMountsField(b, s.ContainerMounts)
	return append(b, '}'), nil
}

func appendSignalSpecJSON(b []byte, s *SignalSpec) []byte {
	b = append(b, `{"signal":`...)
	b = strconv.AppendInt(b, int64(s.Signal), 10)
	b = append(b, `,"seconds":`...)
	b = strconv.AppendInt(b, int64(s.Seconds), 10)
	b = appendBoolField(b, `,"batch_only":true`, s.BatchOnly)
	return append(b, '}')
}

func appendContainerMountJSON(b []byte, m *ContainerMount) []byte {
	b = append(b, `{"source":`...)
	b = appendJSONString(b, m.Source)
	b = append(b, `,"destination":`...)
	b = appendJSONString(b, m.Destination)
	b = appendBoolField(b, `,"read_only":true`, m.ReadOnly)
	return append(b, '}')
}

// The append*Field helpers write an omitempty field: key is the comma
// and quoted name with its colon, and nothing is written for a zero
// value.

func appendStringField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

func appendIntField(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendBoolField takes the whole `,"name":true` since false is omitted.
func appendBoolField(b []byte, keyTrue string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, keyTrue...)
}

func appendStringsField(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONTime writes t as time.Time.MarshalJSON does. RFC 3339 needs
// no escaping, so AppendText's output only needs quotes; on failure the
// error is rebuilt from MarshalJSON so that it reads as json.Marshal's.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		_, err = t.MarshalJSON()
		return b, &json.MarshalerError{Type: reflect.TypeFor[time.Time](), Err: err}
	}
	return append(out, '"'), nil
}

const hexDigits = "0123456789abcdef"

// jsonEscapeASCII marks the ASCII bytes that encoding/json escapes:
// control bytes, quote, backslash and the HTML-sensitive < > &.
var jsonEscapeASCII = [utf8.RuneSelf]bool{
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0a: true, 0x0b: true, 0x0c: true, 0x0d: true, 0x0e: true, 0x0f: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1a: true, 0x1b: true, 0x1c: true, 0x1d: true, 0x1e: true, 0x1f: true,
	'"': true, '\\': true, '<': true, '>': true, '&': true,
}

// appendJSONString quotes s as encoding/json does by default: \" \\ \b
// \f \n \r \t in short form, other control bytes and the HTML-sensitive
// < > & as \u00XX, U+2028 and U+2029 as \u202X (they end lines in
// JavaScript), and each byte of invalid UTF-8 as \ufffd. DEL and all
// other valid UTF-8 pass through.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !jsonEscapeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// DecodeJSON fills r from the controller's answer to a submission. The
// usual answer, {"job_id":N}, is read by hand, for the reason AppendJSON
// exists (encoding/json's first decode of a type builds its caches, a
// tenth of a millisecond in a fresh sbatch); any other answer goes
// through encoding/json, errors included.
func (r *SubmitResponse) DecodeJSON(data []byte) error {
	const prefix = `{"job_id":`
	b := bytes.TrimRight(data, " \t\r\n")
	if d, ok := bytes.CutPrefix(b, []byte(prefix)); ok && len(d) > 1 && d[len(d)-1] == '}' {
		digits := d[:len(d)-1]
		if (len(digits) == 1 || digits[0] != '0') && allDigits(digits) {
			if id, err := strconv.ParseUint(string(digits), 10, 64); err == nil {
				*r = SubmitResponse{JobID: id}
				return nil
			}
		}
	}
	*r = SubmitResponse{}
	return json.Unmarshal(data, r)
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// appendContainerMountsField writes an omitempty container_mounts list
// (a job spec's and a launch's).
func appendContainerMountsField(b []byte, ms []ContainerMount) []byte {
	if len(ms) == 0 {
		return b
	}
	b = append(b, `,"container_mounts":[`...)
	for i := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendContainerMountJSON(b, &ms[i])
	}
	return append(b, ']')
}
