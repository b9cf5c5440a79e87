package api

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Task binding of steps (issue 22): srun validates --gpu-bind and
// --cpu-bind with these parsers, the controller gives each task its GPUs
// by GPUBind, and the node daemon binds each task's CPUs by CPUBind.

// GPUBind is a parsed --gpu-bind: how a step's tasks share its GPUs on
// a node.
type GPUBind struct {
	// Verbose reports each task's GPUs on its standard error.
	Verbose bool
	// Kind is "" (not given), "closest", "none", "map_gpu", "mask_gpu",
	// "single" or "per_task".
	Kind string
	// List holds map_gpu's GPU numbers or mask_gpu's masks, one per
	// task, repeated as needed; N is single's tasks per GPU and
	// per_task's GPUs per task.
	List []uint64
	N    int
}

// ParseGPUBind reads --gpu-bind=[verbose,]TYPE as Slurm 22.05 does
// ("closest" and "none" may be abbreviated to their first letter). The
// error is Slurm's text.
func ParseGPUBind(s string) (GPUBind, error) {
	var b GPUBind
	if s == "" {
		return b, nil
	}
	bad := fmt.Errorf("Invalid --gpu-bind argument: gpu:%s", s)
	arg := s
	if len(arg) >= 8 && strings.EqualFold(arg[:8], "verbose,") {
		b.Verbose, arg = true, arg[8:]
	}
	lower := strings.ToLower(arg)
	switch {
	case arg == "":
		return b, bad
	case strings.HasPrefix(lower, "map_gpu:"):
		l, err := numList(arg[8:], false)
		if err != nil || len(l) == 0 {
			return b, bad
		}
		b.Kind, b.List = "map_gpu", l
	case strings.HasPrefix(lower, "mask_gpu:"):
		l, err := numList(arg[9:], true)
		if err != nil || len(l) == 0 {
			return b, bad
		}
		b.Kind, b.List = "mask_gpu", l
	case strings.HasPrefix(lower, "per_task:"), strings.HasPrefix(lower, "single:"):
		kind, v, _ := strings.Cut(lower, ":")
		n, err := strconv.ParseInt(v, 0, 32)
		if err != nil || n < 0 {
			return b, bad
		}
		b.Kind, b.N = kind, int(n)
		if b.N == 0 {
			// Slurm takes 0 and binds as if nothing was given.
			b.Kind = ""
		}
	case lower[0] == 'c':
		b.Kind = "closest"
	case lower[0] == 'n':
		b.Kind = "none"
	default:
		return b, bad
	}
	return b, nil
}

// numList reads a comma-separated list of numbers (hex masks when hex,
// "0x" allowed) where "v*n" repeats v n times.
func numList(s string, hex bool) ([]uint64, error) {
	var out []uint64
	for _, tok := range strings.Split(s, ",") {
		v, times, mult := strings.Cut(tok, "*")
		n := uint64(1)
		if mult {
			m, err := strconv.ParseUint(times, 10, 16)
			if err != nil || m == 0 {
				return nil, fmt.Errorf("invalid multiplier %q", times)
			}
			n = m
		}
		base := 10
		if hex {
			v, base = strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X"), 16
		} else if strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0X") {
			v, base = v[2:], 16
		}
		x, err := strconv.ParseUint(v, base, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", tok)
		}
		for range n {
			out = append(out, x)
		}
	}
	return out, nil
}

// Tasks gives each of ntasks local tasks its GPUs among gpus, the GPUs
// the step's tasks may see on the node: with gpt > 0 (--gpus-per-task,
// per_task:N) task k gets gpus[k·gpt:(k+1)·gpt]; single:N gives one GPU
// to each N tasks in turn; map_gpu and mask_gpu pick by position in
// gpus; otherwise every task sees them all. It is nil without GPUs.
func (b GPUBind) Tasks(gpus []int, ntasks, gpt int) ([][]int, error) {
	if len(gpus) == 0 || ntasks == 0 {
		return nil, nil
	}
	out := make([][]int, ntasks)
	for k := range ntasks {
		switch {
		case b.Kind == "map_gpu":
			i := b.List[k%len(b.List)]
			if i >= uint64(len(gpus)) {
				return nil, fmt.Errorf("--gpu-bind=map_gpu: GPU %d is not among the step's %d GPUs on the node", i, len(gpus))
			}
			out[k] = []int{gpus[i]}
		case b.Kind == "mask_gpu":
			m := b.List[k%len(b.List)]
			if bits.Len64(m) > len(gpus) || m == 0 {
				return nil, fmt.Errorf("--gpu-bind=mask_gpu: mask 0x%x does not fit the step's %d GPUs on the node", m, len(gpus))
			}
			for i := range gpus {
				if m&(1<<i) != 0 {
					out[k] = append(out[k], gpus[i])
				}
			}
		case b.Kind == "single":
			out[k] = []int{gpus[(k/b.N)%len(gpus)]}
		case gpt > 0:
			if (k+1)*gpt > len(gpus) {
				return nil, fmt.Errorf("%d tasks × %d GPUs do not fit the step's %d GPUs on the node", ntasks, gpt, len(gpus))
			}
			out[k] = append([]int(nil), gpus[k*gpt:(k+1)*gpt]...)
		default:
			out[k] = append([]int(nil), gpus...)
		}
	}
	return out, nil
}

// CPUBind is a parsed --cpu-bind.
type CPUBind struct {
	// Verbose reports each task's mask on its standard error.
	Verbose bool
	// Kind is how tasks are bound: "" (no type given), "none", "rank",
	// "map_cpu", "mask_cpu", "rank_ldom", "map_ldom" or "mask_ldom".
	Kind string
	// Unit is what automatic masks bind to: "", "sockets", "cores",
	// "threads" or "ldoms".
	Unit string
	// List holds the map's CPU (or domain) numbers or the masks, one
	// per task, repeated as needed.
	List []uint64
	// Help asks for the option's help text.
	Help bool
}

// ErrCPUBind ends a --cpu-bind that did not parse; the error's other
// lines say why (Slurm: "Failed to parse --cpu-bind= values.").
var ErrCPUBind = errors.New("Failed to parse --cpu-bind= values.")

// CPUBindError is a --cpu-bind that does not parse: Lines are Slurm's
// error lines; it wraps ErrCPUBind.
type CPUBindError struct{ Lines []string }

func (e *CPUBindError) Error() string { return strings.Join(e.Lines, "; ") }
func (e *CPUBindError) Unwrap() error { return ErrCPUBind }

// ParseCPUBind reads --cpu-bind=[{quiet|verbose},]TYPE as Slurm 22.05
// does: comma-separated words, where a comma followed by a number
// continues a map or mask list.
func ParseCPUBind(s string) (CPUBind, error) {
	var b CPUBind
	var bad []string
	for _, tok := range splitBindWords(s) {
		lower := strings.ToLower(tok)
		list := func(kind string) {
			_, l, _ := strings.Cut(tok, ":")
			if _, l2, ok := strings.Cut(tok, "="); ok && !strings.Contains(tok, ":") {
				l = l2
			}
			b.Kind, b.List = kind, nil
			if l == "" {
				bad = append(bad, fmt.Sprintf("missing list for \"--cpu-bind=%s:<list>\"", kind))
				return
			}
			mask := strings.HasPrefix(kind, "mask")
			for _, x := range strings.Split(l, ",") {
				v, times, mult := strings.Cut(x, "*")
				n := uint64(1)
				if mult {
					m, err := strconv.ParseUint(times, 10, 16)
					if err != nil || m == 0 {
						bad = append(bad, fmt.Sprintf("Invalid %s multiplier: %s", kind, times))
						return
					}
					n = m
				}
				base, digits := 10, v
				switch {
				case mask:
					base, digits = 16, strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
				case strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0X"):
					base, digits = 16, v[2:]
				}
				num, err := strconv.ParseUint(digits, base, 64)
				if err != nil || digits == "" {
					off := firstBad(digits, base)
					bad = append(bad, fmt.Sprintf("Failed to validate number: %s, the offending character is %s", v, off))
					return
				}
				for range n {
					b.List = append(b.List, num)
				}
			}
		}
		switch {
		case lower == "help":
			b.Help = true
		case lower == "q" || lower == "quiet":
			b.Verbose = false
		case lower == "v" || lower == "verbose":
			b.Verbose = true
		case lower == "one_thread":
		case lower == "no" || lower == "none":
			b.Kind, b.List = "none", nil
		case lower == "rank":
			b.Kind, b.List = "rank", nil
		case lower == "rank_ldom":
			b.Kind, b.List = "rank_ldom", nil
		case strings.HasPrefix(lower, "map_cpu") || strings.HasPrefix(lower, "mapcpu"):
			list("map_cpu")
		case strings.HasPrefix(lower, "mask_cpu") || strings.HasPrefix(lower, "maskcpu"):
			list("mask_cpu")
		case strings.HasPrefix(lower, "map_ldom") || strings.HasPrefix(lower, "mapldom"):
			list("map_ldom")
		case strings.HasPrefix(lower, "mask_ldom") || strings.HasPrefix(lower, "maskldom"):
			list("mask_ldom")
		case lower == "socket" || lower == "sockets":
			b.Unit = "sockets"
		case lower == "core" || lower == "cores":
			b.Unit = "cores"
		case lower == "thread" || lower == "threads":
			b.Unit = "threads"
		case lower == "ldom" || lower == "ldoms":
			b.Unit = "ldoms"
		default:
			bad = append(bad, fmt.Sprintf("unrecognized --cpu-bind argument \"%s\"", tok))
		}
		if len(bad) > 0 {
			return b, &CPUBindError{Lines: bad}
		}
	}
	return b, nil
}

// firstBad is the first character of s that is not a digit of base, as
// a string ("" when there is none: s is empty).
func firstBad(s string, base int) string {
	for _, c := range s {
		if _, err := strconv.ParseUint(string(c), base, 8); err != nil {
			return string(c)
		}
	}
	return ""
}

// splitBindWords splits a --cpu-bind value at the commas that are not
// followed by a number (those continue a map or mask list), as Slurm's
// slurm_verify_cpu_bind does.
func splitBindWords(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && !isBindValue(s[i+1:]) {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// isBindValue is Slurm's _isvalue: s starts with a decimal digit, or
// is hex digits up to the next comma or its end.
func isBindValue(s string) bool {
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		return true
	}
	i := 0
	for i < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i]) >= 0 {
		i++
	}
	return i == len(s) || s[i] == ','
}
