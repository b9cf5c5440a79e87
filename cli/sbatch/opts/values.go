package opts

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// MemWholeNode is the MemPerNodeMB value sbatch sends for --mem=0: all
// the memory of each allocated node. JobSpec treats 0 as "not given", so
// the request needs a value of its own.
const MemWholeNode = api.MemWholeNode

// errorf returns a user-facing validation error worded like sbatch's.
func errorf(format string, args ...any) error {
	return api.Invalid(format, args...)
}

// parseInt is Slurm's parse_int: a plain decimal that fits an int,
// positive (> 0) when asked, never negative.
func parseInt(name, v string, positive bool) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil && errors.Is(err, strconv.ErrRange) {
		return 0, errorf("Numeric argument (%s) too big for %s.", v, name)
	}
	if err != nil || n < 0 || (positive && n == 0) {
		return 0, errorf("Invalid numeric value \"%s\" for %s.", v, name)
	}
	if n > math.MaxInt32 {
		return 0, errorf("Numeric argument (%d) too big for %s.", n, name)
	}
	return int(n), nil
}

// parseNodeCount reads -N's N or MIN-MAX; a k or m suffix multiplies by
// 1024 or 1048576 as Slurm's verify_node_count does, and so does an
// empty MIN ("-N-3", which scripts computing "1-4" write): it means 1.
func parseNodeCount(v string) (lo, hi int, err error) {
	bad := errorf("invalid node count `%s'", v)
	one := func(s string) (int, bool) {
		mult := 1
		switch {
		case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
			mult, s = 1024, s[:len(s)-1]
		case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
			mult, s = 1024*1024, s[:len(s)-1]
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > math.MaxInt32/mult || !isDigits(s) {
			return 0, false
		}
		return n * mult, true
	}
	a, b, isRange := strings.Cut(strings.TrimSpace(v), "-")
	if isRange && strings.TrimSpace(a) == "" {
		a = "1"
	}
	lo, ok := one(a)
	if !ok {
		return 0, 0, bad
	}
	if !isRange {
		return lo, 0, nil
	}
	hi, ok = one(b)
	if !ok || hi < lo {
		return 0, 0, bad
	}
	if hi == lo {
		hi = 0
	}
	return lo, hi, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseSize is Slurm's str_to_mbytes: a whole number with an optional
// K, M, G or T suffix; the default unit is megabytes and kilobytes round
// up. ok is false for anything else.
func parseSize(v string) (int64, bool) {
	s := strings.TrimSpace(v)
	if s == "" {
		return 0, false
	}
	mult, div := int64(1), int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		div = 1024
	case 'm', 'M':
	case 'g', 'G':
		mult = 1024
	case 't', 'T':
		mult = 1024 * 1024
	default:
		s += "M"
	}
	s = s[:len(s)-1]
	if !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, false
	}
	// Rounded up without n+div-1, which overflows near MaxInt64.
	n *= mult
	if n%div != 0 {
		return n/div + 1, true
	}
	return n / div, true
}

// gpuReq is one GPU request: an optional model and a count.
type gpuReq struct {
	Type  string
	Count int
}

// parseGPUCount reads the [type:]N form of --gpus, --gpus-per-node,
// --gpus-per-task and --gpus-per-socket. A type alone asks for one GPU.
// Tide schedules one GPU model per job, so a list of several types is
// refused rather than half-honoured.
func parseGPUCount(opt, v string) (gpuReq, error) {
	bad := errorf("Invalid --%s specification: %s", opt, v)
	items := strings.Split(v, ",")
	if len(items) > 1 {
		return gpuReq{}, errorf("Invalid --%s specification: %s: Tide supports one GPU type per job", opt, v)
	}
	parts := strings.Split(strings.TrimSpace(items[0]), ":")
	if len(parts) > 1 && strings.EqualFold(parts[0], "gpu") {
		parts = parts[1:]
	}
	var r gpuReq
	switch len(parts) {
	case 1:
		if isDigits(parts[0]) {
			n, err := strconv.Atoi(parts[0])
			if err != nil || n > math.MaxInt32 {
				return gpuReq{}, bad
			}
			r.Count = n
		} else {
			r.Type, r.Count = parts[0], 1
		}
	case 2:
		n, err := strconv.Atoi(parts[1])
		if err != nil || !isDigits(parts[1]) || n > math.MaxInt32 {
			return gpuReq{}, bad
		}
		r.Type, r.Count = parts[0], n
	default:
		return gpuReq{}, bad
	}
	if strings.EqualFold(r.Type, "gpu") {
		// "gpu" is the resource, not a model: "gpu" alone is one GPU
		// of any model, as --gres=gpu is, and "gpu:gpu:2" two.
		r.Type = ""
	}
	if !validGPUType(r.Type) {
		return gpuReq{}, bad
	}
	return r, nil
}

// validGPUType accepts "" or a model name of letters, digits, '_', '-'
// and '.', starting with a letter, as gres.conf Type= names are.
func validGPUType(t string) bool {
	if t == "" {
		return true
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// gresReq is what one --gres asks for: GPUs (with HasGPU), or Slurm's
// GPU-sharing resources, which Tide maps onto slices: shard:N is N
// shards of one GPU, mps:PCT a slice of PCT percent of its compute.
type gresReq struct {
	GPU    gpuReq
	HasGPU bool
	Shards int
	MPS    int
}

// parseGres reads --gres: a comma list of name[:type][:count] items.
// Tide knows "gpu", and "shard" and "mps" (counts only, not combined
// with gpu in one list); "none" clears the request.
func parseGres(v string) (gresReq, error) {
	bad := errorf("Invalid generic resource (gres) specification")
	s := strings.TrimSpace(v)
	if strings.EqualFold(s, "none") {
		return gresReq{}, nil
	}
	if s == "" {
		return gresReq{}, bad
	}
	var out gresReq
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		item = strings.TrimPrefix(strings.TrimPrefix(item, "gres:"), "gres/")
		parts := strings.Split(item, ":")
		switch parts[0] {
		case "gpu":
		case "shard", "mps":
			n, ok := sharingCount(parts)
			if !ok || parts[0] == "mps" && n > 100 {
				return gresReq{}, bad
			}
			if parts[0] == "shard" {
				out.Shards += n
			} else {
				out.MPS += n
			}
			if out.Shards > math.MaxInt32 {
				return gresReq{}, bad
			}
			continue
		default:
			return gresReq{}, bad
		}
		one := gpuReq{Count: 1}
		switch len(parts) {
		case 1:
		case 2:
			if isDigits(parts[1]) {
				n, err := strconv.Atoi(parts[1])
				if err != nil || n > math.MaxInt32 {
					return gresReq{}, bad
				}
				one.Count = n
			} else {
				one.Type = parts[1]
			}
		case 3:
			n, err := strconv.Atoi(parts[2])
			if err != nil || !isDigits(parts[2]) || n > math.MaxInt32 {
				return gresReq{}, bad
			}
			one.Type, one.Count = parts[1], n
		default:
			return gresReq{}, bad
		}
		if strings.EqualFold(one.Type, "gpu") {
			one.Type = "" // the resource, not a model, as in --gpus
		}
		if !validGPUType(one.Type) {
			return gresReq{}, bad
		}
		if out.HasGPU {
			if one.Type != out.GPU.Type {
				return gresReq{}, errorf("Invalid generic resource (gres) specification: %s: Tide supports one GPU type per job", v)
			}
			one.Count += out.GPU.Count
			if one.Count > math.MaxInt32 {
				return gresReq{}, bad
			}
		}
		out.GPU, out.HasGPU = one, true
	}
	switch {
	case out.HasGPU && (out.Shards > 0 || out.MPS > 0):
		return gresReq{}, errorf("Invalid generic resource (gres) specification: %s: gpu cannot be combined with shard or mps; use --gpus=N with --gres=shard:N or --gres=mps:PCT for N slices", v)
	case out.Shards > 0 && out.MPS > 0:
		return gresReq{}, errorf("Invalid generic resource (gres) specification: %s: shard and mps cannot be combined; use --gpu-mem with --gpu-compute", v)
	case out.MPS > 100:
		return gresReq{}, errorf("Invalid generic resource (gres) specification: %s: mps is a percentage of one GPU (at most 100)", v)
	}
	return out, nil
}

// sharingCount reads the count of a shard or mps item: name:N (a type,
// name:type:N, is accepted and ignored, as Tide has one model per job).
func sharingCount(parts []string) (int, bool) {
	c := parts[len(parts)-1]
	if len(parts) < 2 || len(parts) > 3 || !isDigits(c) {
		return 0, false
	}
	n, err := strconv.Atoi(c)
	return n, err == nil && n >= 1 && n <= math.MaxInt32
}

// signals are signal names (without "SIG") and their Linux numbers. A
// static table rather than a map, which every CLI command would build
// in its package initialisation.
var signals = [...]struct {
	name string
	num  int
}{
	{"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"ILL", 4}, {"TRAP", 5}, {"ABRT", 6}, {"IOT", 6},
	{"BUS", 7}, {"FPE", 8}, {"KILL", 9}, {"USR1", 10}, {"SEGV", 11}, {"USR2", 12},
	{"PIPE", 13}, {"ALRM", 14}, {"TERM", 15}, {"STKFLT", 16}, {"CHLD", 17}, {"CONT", 18},
	{"STOP", 19}, {"TSTP", 20}, {"TTIN", 21}, {"TTOU", 22}, {"URG", 23}, {"XCPU", 24},
	{"XFSZ", 25}, {"VTALRM", 26}, {"PROF", 27}, {"WINCH", 28}, {"IO", 29}, {"POLL", 29},
	{"PWR", 30}, {"SYS", 31},
}

// signalByName looks a signal name (without "SIG") up in signals.
func signalByName(name string) (int, bool) {
	for _, s := range signals {
		if s.name == name {
			return s.num, true
		}
	}
	return 0, false
}

// SignalNumber reads a signal as Slurm's sig_name2num does: a name with
// or without the SIG prefix, in any case, or a number from 1 to 64.
func SignalNumber(s string) (int, bool) {
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 1 && n <= 64
	}
	u := strings.ToUpper(s)
	n, ok := signalByName(strings.TrimPrefix(u, "SIG"))
	if !ok {
		n, ok = signalByName(u)
	}
	return n, ok
}

// parseSignal reads --signal=[{R|B}:]SIG[@TIME]: B: sends the signal to
// the batch shell alone instead of the job's steps; resv reports the R
// flag (the job may overlap a reservation), which changes nothing in
// Tide. TIME is 0 to 65535 seconds, 60 when not given.
func parseSignal(v string) (spec *api.SignalSpec, resv bool, err error) {
	bad := errorf("Invalid --signal specification")
	s := v
	sp := &api.SignalSpec{Seconds: 60}
	if flags, rest, ok := strings.Cut(s, ":"); ok {
		f := strings.ToUpper(flags)
		if f == "" || strings.Trim(f, "RB") != "" || len(f) > 2 || (len(f) == 2 && f[0] == f[1]) {
			return nil, false, bad
		}
		sp.BatchOnly = strings.Contains(f, "B")
		resv = strings.Contains(f, "R")
		s = rest
	}
	sig, at, hasAt := strings.Cut(s, "@")
	n, ok := SignalNumber(sig)
	if !ok {
		return nil, false, bad
	}
	sp.Signal = n
	if hasAt {
		t, err := strconv.Atoi(at)
		if err != nil || !isDigits(at) || t > 0xffff {
			return nil, false, bad
		}
		sp.Seconds = t
	}
	return sp, resv, nil
}

// parseTime reads a time limit for --time or --time-min. Slurm takes a
// limit of zero as "no limit" here.
func parseTime(opt, v string) (int64, error) {
	secs, err := api.ParseTimeLimit(v)
	if err == nil {
		return secs, nil
	}
	if isZeroTime(v) {
		return api.Infinite, nil
	}
	return 0, errorf("Invalid --%s specification", opt)
}

// isZeroTime reports whether v is a well-formed time whose fields are all
// zero ("0", "00:00:00", "0-0").
func isZeroTime(v string) bool {
	s := strings.TrimSpace(v)
	if s == "" || strings.Trim(s, "0:-") != "" || !strings.Contains(s, "0") {
		return false
	}
	_, err := api.ParseTimeLimit(strings.ReplaceAll(s, "0", "1"))
	return err == nil
}

// parseHostlist expands a hostlist expression for -w and -x.
func parseHostlist(opt, v string) ([]string, error) {
	hosts, err := hostlist.Expand(v)
	if err != nil {
		return nil, errorf("Invalid --%s specification: %v", opt, err)
	}
	if len(hosts) == 0 {
		return nil, errorf("Invalid --%s specification: empty host list", opt)
	}
	return hosts, nil
}

// parseHostFile reads a node file (-F, or -w with a path): hostlist
// expressions separated by white space or new lines, '#' starting a
// comment.
func parseHostFile(opt, path string, data []byte) ([]string, error) {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, w := range strings.Fields(line) {
			hosts, err := hostlist.Expand(w)
			if err != nil {
				return nil, errorf("Invalid --%s specification: %s: %v", opt, path, err)
			}
			out = append(out, hosts...)
		}
	}
	if len(out) == 0 {
		return nil, errorf("Invalid --%s specification: %s lists no nodes", opt, path)
	}
	return out, nil
}

// oneOf checks v against an enum, case-insensitively, and returns the
// canonical spelling.
func oneOf(opt, v string, allowed ...string) (string, error) {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a, nil
		}
	}
	return "", errorf("Invalid --%s specification: %q (expected one of %s)", opt, v, strings.Join(allowed, ", "))
}

// listOf checks a comma list against an enum.
func listOf(opt, v string, allowed ...string) error {
	if strings.TrimSpace(v) == "" {
		return errorf("Invalid --%s specification: empty list", opt)
	}
	for _, item := range strings.Split(v, ",") {
		if _, err := oneOf(opt, item, allowed...); err != nil {
			return err
		}
	}
	return nil
}
