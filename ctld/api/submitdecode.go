package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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
	d := fastDecoder{b: data}
	var out SubmitRequest
	if d.submitRequest(&out) {
		*r = out
		return nil
	}
	*r = SubmitRequest{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(r)
}

// fastDecoder reads the JSON encoding/json's encoder writes; each
// method reports false where it meets anything else, and the caller
// then gives up.
type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips white space and consumes c if it comes next.
func (d *fastDecoder) next(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object, calling field for each key (its bytes are
// only valid during the call) with the decoder before the value.
func (d *fastDecoder) object(field func(key []byte) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		d.ws()
		key, ok := d.plainString()
		if !ok || !d.next(':') || !field(key) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// plainString reads a string without escapes that is valid UTF-8 and
// returns its bytes (aliasing the input).
func (d *fastDecoder) plainString() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			s := d.b[start:j]
			if !utf8.Valid(s) {
				return nil, false
			}
			d.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string value, unescaping as encoding/json does (a lone
// surrogate becomes U+FFFD); one with invalid UTF-8 is left to
// encoding/json, which replaces what is invalid.
func (d *fastDecoder) str(dst *string) bool {
	d.ws()
	if s, ok := d.plainString(); ok {
		*dst = string(s)
		return true
	}
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	out := make([]byte, 0, 64)
	j := d.i + 1
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return d.strByJSON(dst, j+1)
			}
			*dst, d.i = string(out), j+1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.b) {
			return false
		}
		switch e := d.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(d.b[j+2:])
			if r < 0 {
				return false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if j+1 < len(d.b) && d.b[j] == '\\' && d.b[j+1] == 'u' {
					if r2 := hex4(d.b[j+2:]); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							j += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return false
		}
		j += 2
	}
	return false
}

// strByJSON decodes the string from d.i to end with encoding/json.
func (d *fastDecoder) strByJSON(dst *string, end int) bool {
	var s string
	if json.Unmarshal(d.b[d.i:end], &s) != nil {
		return false
	}
	*dst, d.i = s, end
	return true
}

// hex4 is the value of four hex digits at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

func (d *fastDecoder) strs(dst *[]string) bool {
	if !d.next('[') {
		return false
	}
	out := []string{}
	if !d.next(']') {
		for {
			var s string
			if !d.str(&s) {
				return false
			}
			out = append(out, s)
			if d.next(',') {
				continue
			}
			if !d.next(']') {
				return false
			}
			break
		}
	}
	*dst = out
	return true
}

// number returns an integer's digits (with its sign), refusing
// fractions, exponents and leading zeros.
func (d *fastDecoder) number() ([]byte, bool) {
	d.ws()
	start := d.i
	j := start
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	if j == digits || (d.b[digits] == '0' && j-digits > 1) {
		return nil, false
	}
	if j < len(d.b) {
		switch d.b[j] {
		case '.', 'e', 'E':
			return nil, false
		}
	}
	d.i = j
	return d.b[start:j], true
}

func (d *fastDecoder) int(dst *int) bool {
	n, ok := d.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
	if err != nil {
		return false
	}
	*dst = int(v)
	return true
}

func (d *fastDecoder) int64(dst *int64) bool {
	n, ok := d.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return false
	}
	*dst = v
	return true
}

func (d *fastDecoder) uint32(dst *uint32) bool {
	n, ok := d.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(n), 10, 32)
	if err != nil {
		return false
	}
	*dst = uint32(v)
	return true
}

func (d *fastDecoder) bool(dst *bool) bool {
	d.ws()
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		*dst, d.i = true, d.i+4
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		*dst, d.i = false, d.i+5
	default:
		return false
	}
	return true
}

// value hands the next value (an object, array, string or literal) to
// encoding/json with unknown fields refused, as the whole request is.
func (d *fastDecoder) value(dst any) bool {
	d.ws()
	end, ok := d.valueEnd(d.i, 0)
	if !ok {
		return false
	}
	if bytes.Equal(d.b[d.i:end], []byte("null")) {
		return false // a null leaves the field alone: encoding/json's call
	}
	dec := json.NewDecoder(bytes.NewReader(d.b[d.i:end]))
	dec.DisallowUnknownFields()
	if dec.Decode(dst) != nil {
		return false
	}
	d.i = end
	return true
}

// valueEnd finds where the value at i ends, without validating it
// (encoding/json does); depth bounds nesting.
func (d *fastDecoder) valueEnd(i, depth int) (int, bool) {
	if i >= len(d.b) || depth > 32 {
		return 0, false
	}
	switch d.b[i] {
	case '"':
		for j := i + 1; j < len(d.b); j++ {
			switch d.b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
		return 0, false
	case '{', '[':
		for j := i + 1; j < len(d.b); {
			switch d.b[j] {
			case '}', ']':
				return j + 1, true
			case '"', '{', '[':
				end, ok := d.valueEnd(j, depth+1)
				if !ok {
					return 0, false
				}
				j = end
			default:
				j++
			}
		}
		return 0, false
	default:
		j := i
		for j < len(d.b) {
			switch d.b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

func (d *fastDecoder) submitRequest(r *SubmitRequest) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "spec":
			return d.jobSpec(&r.Spec)
		case "test_only":
			return d.bool(&r.TestOnly)
		}
		return false
	})
}

// jobSpec reads JobSpec's fields by their JSON names (see AppendJSON).
func (d *fastDecoder) jobSpec(s *JobSpec) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return d.str(&s.Name)
		case "account":
			return d.str(&s.Account)
		case "partition":
			return d.str(&s.Partition)
		case "qos":
			return d.str(&s.QOS)
		case "comment":
			return d.str(&s.Comment)
		case "script":
			return d.str(&s.Script)
		case "script_args":
			return d.strs(&s.ScriptArgs)
		case "work_dir":
			return d.str(&s.WorkDir)
		case "submit_dir":
			return d.str(&s.SubmitDir)
		case "submit_host":
			return d.str(&s.SubmitHost)
		case "environment":
			return d.strs(&s.Environment)
		case "nodes":
			return d.int(&s.Nodes)
		case "max_nodes":
			return d.int(&s.MaxNodes)
		case "tasks":
			return d.int(&s.Tasks)
		case "tasks_per_node":
			return d.int(&s.TasksPerNode)
		case "cpus_per_task":
			return d.int(&s.CPUsPerTask)
		case "mem_per_node_mb":
			return d.int64(&s.MemPerNodeMB)
		case "mem_per_cpu_mb":
			return d.int64(&s.MemPerCPUMB)
		case "mem_per_gpu_mb":
			return d.int64(&s.MemPerGPUMB)
		case "cpus_per_gpu":
			return d.int(&s.CPUsPerGPU)
		case "gpus":
			return d.int(&s.GPUs)
		case "gpus_per_node":
			return d.int(&s.GPUsPerNode)
		case "gpus_per_task":
			return d.int(&s.GPUsPerTask)
		case "gpu_type":
			return d.str(&s.GPUType)
		case "gpu_mem_mb":
			return d.int64(&s.GPUMemMB)
		case "gpu_compute_pct":
			return d.int(&s.GPUComputePct)
		case "gpu_shards":
			return d.int(&s.GPUShards)
		case "exclusive":
			return d.bool(&s.Exclusive)
		case "switches":
			return d.int(&s.Switches)
		case "comm":
			return d.str(&s.Comm)
		case "switch_wait":
			return d.int64(&s.SwitchWait)
		case "node_list":
			return d.strs(&s.NodeList)
		case "exclude":
			return d.strs(&s.Exclude)
		case "constraint":
			return d.str(&s.Constraint)
		case "time_limit":
			return d.int64(&s.TimeLimit)
		case "time_min":
			return d.int64(&s.TimeMin)
		case "begin_time":
			return d.value(&s.BeginTime)
		case "hold":
			return d.bool(&s.Hold)
		case "nice":
			return d.int(&s.Nice)
		case "priority":
			return d.uint32(&s.Priority)
		case "stdout":
			return d.str(&s.Stdout)
		case "stderr":
			return d.str(&s.Stderr)
		case "stdin":
			return d.str(&s.Stdin)
		case "open_mode":
			return d.str(&s.OpenMode)
		case "requeue":
			var v bool
			if !d.bool(&v) {
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
			return d.value(s.Signal)
		case "dependency":
			return d.str(&s.Dependency)
		case "kill_invalid_dep":
			return d.bool(&s.KillInvalidDep)
		case "array":
			return d.str(&s.Array)
		case "mail_type":
			return d.str(&s.MailType)
		case "mail_user":
			return d.str(&s.MailUser)
		case "allocation":
			return d.bool(&s.Allocation)
		case "container_image":
			return d.str(&s.ContainerImage)
		case "container_mounts":
			return d.value(&s.ContainerMounts)
		}
		return false
	})
}
