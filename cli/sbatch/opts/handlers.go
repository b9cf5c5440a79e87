package opts

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// This file holds the handlers of the option table: the ones with an
// effect on the JobSpec, then the validators of options Tide ignores.

// setArray checks --array's syntax (the controller checks it against
// its max_array_size) and keeps it as written.
func setArray(st *state, v string, _ bool) error {
	if _, err := api.ParseArraySpec(v, 0); err != nil {
		return errorf("Invalid --array specification")
	}
	st.spec.Array = strings.TrimSpace(v)
	return nil
}

// setKillOnInvalidDep is --kill-on-invalid-dep=yes|no.
func setKillOnInvalidDep(st *state, v string, _ bool) error {
	w, err := oneOf("kill-on-invalid-dep", v, "yes", "no")
	if err != nil {
		return err
	}
	st.spec.KillInvalidDep = w == "yes"
	return nil
}

func setNodes(st *state, v string, _ bool) error {
	lo, hi, err := parseNodeCount(v)
	if err != nil {
		return err
	}
	st.spec.Nodes, st.spec.MaxNodes = lo, hi
	return nil
}

// setTmp is --tmp: the temporary disk each node must have, MB by
// default or with a K, M, G or T suffix (Slurm's str_to_mbytes).
func setTmp(st *state, v string, _ bool) error {
	mb, ok := parseSize(v)
	if !ok {
		return errorf("Invalid --tmp specification")
	}
	st.spec.TmpDiskMB = mb
	return nil
}

func setMemNode(st *state, v string, _ bool) error { return st.setMem(memNode, v) }
func setMemCPU(st *state, v string, _ bool) error  { return st.setMem(memCPU, v) }
func setMemGPU(st *state, v string, _ bool) error  { return st.setMem(memGPU, v) }

func (st *state) setMem(kind int, v string) error {
	mb, ok := parseSize(v)
	if !ok {
		return errorf("Invalid --%s specification", memNames[kind])
	}
	st.mem[kind], st.memBy[kind] = mb, st.layer
	return nil
}

func setGPUs(st *state, v string, _ bool) error        { return st.setGPU(gpuJob, v) }
func setGPUsPerNode(st *state, v string, _ bool) error { return st.setGPU(gpuNode, v) }
func setGPUsPerTask(st *state, v string, _ bool) error { return st.setGPU(gpuTask, v) }

func (st *state) setGPU(kind, v string) error {
	r, err := parseGPUCount(kind, v)
	if err != nil {
		return err
	}
	st.gpu[kind] = r
	if kind == gpuNode {
		st.gpuFromGres = false
	}
	return nil
}

func setGres(st *state, v string, _ bool) error {
	r, err := parseGres(v)
	if err != nil {
		return err
	}
	// A later --gres replaces an earlier one whole; GPUs that
	// --gpus-per-node gave stay when the new --gres names shards or mps
	// only (N slices per node).
	switch {
	case r.HasGPU:
		st.gpu[gpuNode], st.gpuFromGres = r.GPU, true
	case st.gpuFromGres || r.Shards == 0 && r.MPS == 0:
		delete(st.gpu, gpuNode)
		st.gpuFromGres = false
	}
	st.gresShards, st.gresMPS = r.Shards, r.MPS
	return nil
}

func setGPUMem(st *state, v string, _ bool) error {
	mb, ok := parseSize(v)
	if !ok || mb == 0 {
		return errorf("Invalid --gpu-mem specification: %s", v)
	}
	st.gpuMem = mb
	return nil
}

func setGPUCompute(st *state, v string, _ bool) error {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), "%"))
	if err != nil || n < 1 || n > 100 {
		return errorf("Invalid --gpu-compute specification: %s: a percentage of one GPU from 1 to 100", v)
	}
	st.gpuCompute = n
	return nil
}

func setChdir(st *state, v string, _ bool) error {
	if strings.TrimSpace(v) == "" {
		return errorf("Invalid --chdir specification: empty directory")
	}
	st.chdir = v
	return nil
}

func setExport(st *state, v string, _ bool) error {
	if _, err := exportEnv(v, nil); err != nil {
		return err
	}
	st.export = v
	return nil
}

func setWrap(st *state, _ string, _ bool) error {
	if st.layer != layerCLI {
		st.warn("--wrap is only honoured on the command line; ignored")
	}
	return nil
}

func setBegin(st *state, v string, _ bool) error {
	t, err := ParseTimeSpec(v, st.in.Now)
	if err != nil {
		return errorf("Invalid --begin specification")
	}
	st.spec.BeginTime = t
	return nil
}

func setDeadline(st *state, v string, _ bool) error {
	if _, err := ParseTimeSpec(v, st.in.Now); err != nil {
		return errorf("Invalid --deadline specification")
	}
	st.warnIgnored("deadline")
	return nil
}

func setNodeList(st *state, v string, _ bool) error {
	if strings.Contains(v, "/") {
		return st.readNodeFile("nodelist", v)
	}
	hosts, err := parseHostlist("nodelist", v)
	if err != nil {
		return err
	}
	st.spec.NodeList = hosts
	return nil
}

func setNodeFile(st *state, v string, _ bool) error { return st.readNodeFile("nodefile", v) }

func (st *state) readNodeFile(opt, path string) error {
	if st.in.ReadFile == nil {
		return errorf("Invalid --%s specification: cannot read %s", opt, path)
	}
	data, err := st.in.ReadFile(st.abs(path))
	if err != nil {
		return errorf("Invalid --%s specification: unable to read %s: %v", opt, path, err)
	}
	hosts, err := parseHostFile(opt, path, data)
	if err != nil {
		return err
	}
	st.spec.NodeList = hosts
	return nil
}

func setExclude(st *state, v string, _ bool) error {
	hosts, err := parseHostlist("exclude", v)
	if err != nil {
		return err
	}
	st.spec.Exclude = hosts
	return nil
}

func setExclusive(st *state, v string, _ bool) error {
	switch strings.ToLower(v) {
	case "", "exclusive":
		st.spec.Exclusive = true
	case "oversubscribe":
		st.spec.Exclusive = false
		st.warnIgnored("oversubscribe")
	case "user", "mcs":
		st.warnIgnored("exclusive=" + strings.ToLower(v))
	default:
		return errorf("Invalid --exclusive specification")
	}
	return nil
}

func setOversubscribe(st *state, _ string, _ bool) error {
	st.spec.Exclusive = false
	st.warnIgnored("oversubscribe")
	return nil
}

func setRequeue(st *state, _ string, _ bool) error {
	b := true
	st.spec.Requeue = &b
	return nil
}

func setNoRequeue(st *state, _ string, _ bool) error {
	b := false
	st.spec.Requeue = &b
	return nil
}

func setOpenMode(st *state, v string, _ bool) error {
	l := strings.ToLower(strings.TrimSpace(v))
	switch {
	case l != "" && strings.HasPrefix("append", l):
		st.spec.OpenMode = "append"
	case l != "" && strings.HasPrefix("truncate", l):
		st.spec.OpenMode = "truncate"
	default:
		return errorf("Invalid --open-mode argument: %s.", v)
	}
	return nil
}

// setSignal takes --signal=[{R|B}:]SIG[@TIME]. R: lets the job overlap
// a reservation with MaxStartDelay; Tide has no such reservations, so
// nothing keeps a job out and the flag is accepted without a word, as
// Slurm does on a cluster without them.
func setSignal(st *state, v string, _ bool) error {
	sp, _, err := parseSignal(v)
	if err != nil {
		return err
	}
	st.spec.Signal = sp
	return nil
}

// niceMax is Slurm's NICE_OFFSET - 3.
const niceMax = 2147483645

func setNice(st *state, v string, has bool) error {
	if !has {
		st.spec.Nice = 100
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return errorf("Invalid --nice value: %s", v)
	}
	if n > niceMax || n < -niceMax {
		return errorf("Nice value out of range (+/- %d)", niceMax)
	}
	st.spec.Nice = int(n)
	return nil
}

// setPriority reads --priority as a Tide level: 1 (lowest) to 10. TOP
// is the highest level (the controller lets only operators raise a
// job above its class's range).
func setPriority(st *state, v string, _ bool) error {
	if strings.EqualFold(strings.TrimSpace(v), "TOP") {
		st.spec.Priority = api.MaxLevel
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < api.MinLevel || n > api.MaxLevel {
		return errorf("Invalid --priority specification: %s (a level from %d to %d)", v, api.MinLevel, api.MaxLevel)
	}
	st.spec.Priority = uint32(n)
	return nil
}

// mailTypes are the --mail-type words of Slurm 22.05.
var mailTypes = []string{"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND",
	"STAGE_OUT", "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS"}

func setMailType(st *state, v string, _ bool) error {
	var out []string
	for _, item := range strings.Split(v, ",") {
		w, err := oneOf("mail-type", strings.TrimSpace(item), mailTypes...)
		if err != nil {
			return errorf("--mail-type=%s invalid", v)
		}
		out = append(out, w)
	}
	st.spec.MailType = strings.Join(out, ",")
	return nil
}

// depTypes are the dependency kinds of Slurm 22.05 (a slice, not a
// map: every CLI command would build a map in its initialisation).
var depTypes = []string{"after", "afterany", "afterburstbuffer", "aftercorr", "afternotok", "afterok", "expand"}

// setDependency checks the syntax of -d (kind:jobid[:jobid...] items
// joined by ',' for all-of or '?' for any-of, or singleton) and keeps it
// as written.
func setDependency(st *state, v string, _ bool) error {
	bad := errorf("Invalid --dependency specification: %s", v)
	s := strings.TrimSpace(v)
	if s == "" || (strings.Contains(s, ",") && strings.Contains(s, "?")) {
		return bad
	}
	for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '?' }) {
		if strings.EqualFold(item, "singleton") {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || !slices.Contains(depTypes, strings.ToLower(parts[0])) {
			return bad
		}
		for _, id := range parts[1:] {
			if !validDepJob(id, strings.EqualFold(parts[0], "after")) {
				return bad
			}
		}
	}
	st.spec.Dependency = s
	return nil
}

// validDepJob accepts JOBID, JOBID_TASK, JOBID_* and, for after,
// JOBID+MINUTES.
func validDepJob(id string, allowDelay bool) bool {
	id, delay, hasDelay := strings.Cut(id, "+")
	if hasDelay && (!allowDelay || !isDigits(delay)) {
		return false
	}
	job, task, hasTask := strings.Cut(id, "_")
	if !isDigits(job) {
		return false
	}
	return !hasTask || task == "*" || isDigits(task)
}

func setNoKill(st *state, v string, has bool) error {
	switch {
	case !has || strings.EqualFold(v, "set"):
		st.warnIgnored("no-kill")
	case strings.EqualFold(v, "off") || strings.EqualFold(v, "no"):
	default:
		return errorf("Invalid --no-kill specification")
	}
	return nil
}

// setUID and setGID keep --uid and --gid (a name or a number) for the
// controller, which resolves them.
func setUID(st *state, v string, _ bool) error {
	if strings.TrimSpace(v) == "" {
		return errorf("Invalid user id: %q", v)
	}
	st.req.User = strings.TrimSpace(v)
	return nil
}

func setGID(st *state, v string, _ bool) error {
	if strings.TrimSpace(v) == "" {
		return errorf("Invalid group id: %q", v)
	}
	st.req.Group = strings.TrimSpace(v)
	return nil
}

// Validators of ignored options.

func checkTime(o *option, v string, _ bool) error {
	_, err := parseTime(o.Long, v)
	return err
}

func checkAcctgFreq(_ *option, v string, _ bool) error {
	if isDigits(v) {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		k, n, ok := strings.Cut(item, "=")
		if !ok || !isDigits(n) {
			return errorf("Invalid --acctg-freq specification: %s", v)
		}
		if _, err := oneOf("acctg-freq", k, "task", "energy", "network", "filesystem"); err != nil {
			return err
		}
	}
	return nil
}

var cpuGovernors = []string{"conservative", "ondemand", "performance", "powersave", "userspace", "schedutil"}

func checkCPUFreq(_ *option, v string, _ bool) error {
	bad := errorf("Invalid --cpu-freq specification: %s", v)
	freqs, gov, hasGov := strings.Cut(v, ":")
	if hasGov {
		if _, err := oneOf("cpu-freq", gov, cpuGovernors...); err != nil {
			return bad
		}
	}
	levels := []string{"low", "medium", "high", "highm1"}
	parts := strings.Split(freqs, "-")
	if len(parts) > 2 {
		return bad
	}
	for _, p := range parts {
		if isDigits(p) {
			continue
		}
		if _, err := oneOf("cpu-freq", p, levels...); err == nil {
			continue
		}
		if _, err := oneOf("cpu-freq", p, cpuGovernors...); err == nil && len(parts) == 1 && !hasGov {
			continue
		}
		return bad
	}
	return nil
}

func checkGetUserEnv(_ *option, v string, has bool) error {
	if !has {
		return nil
	}
	mode := strings.ToUpper(strings.TrimLeft(v, "0123456789"))
	if mode != "" && mode != "S" && mode != "L" {
		return errorf("Invalid --get-user-env specification: %s", v)
	}
	return nil
}

func checkLicenses(_ *option, v string, _ bool) error {
	bad := errorf("Invalid --licenses specification: %s", v)
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '|' }) {
		name, count, hasCount := strings.Cut(item, ":")
		if strings.TrimSpace(name) == "" {
			return bad
		}
		if hasCount {
			if n, err := strconv.Atoi(count); err != nil || n < 1 {
				return bad
			}
		}
	}
	if strings.TrimSpace(v) == "" {
		return bad
	}
	return nil
}

// setDistribution is -m. Jobs are laid out by the scheduler, so only
// arbitrary acts at submission (finishHostfile); the rest is warned
// about, and srun lays out its steps by it.
func setDistribution(st *state, v string, has bool) error {
	if err := checkDistribution(nil, v, has); err != nil {
		return err
	}
	first, _, _ := strings.Cut(v, ",")
	first, _, _ = strings.Cut(first, ":")
	st.arbitrary = strings.EqualFold(first, "arbitrary")
	if !st.arbitrary {
		st.warnIgnored("distribution")
	}
	return nil
}

func checkDistribution(_ *option, v string, _ bool) error {
	bad := errorf("Invalid --distribution specification: %s", v)
	s := v
	if base, pack, ok := strings.Cut(v, ","); ok {
		if _, err := oneOf("distribution", pack, "Pack", "NoPack"); err != nil {
			return bad
		}
		s = base
	}
	levels := strings.Split(s, ":")
	if len(levels) > 3 || s == "" {
		return bad
	}
	for i, l := range levels {
		lw := strings.ToLower(l)
		switch {
		case lw == "*", lw == "block", lw == "cyclic":
		case i == 0 && lw == "arbitrary":
		case i == 0 && strings.HasPrefix(lw, "plane="):
			if n, err := strconv.Atoi(lw[len("plane="):]); err != nil || n < 1 {
				return bad
			}
		case i > 0 && lw == "fcyclic":
		default:
			return bad
		}
	}
	return nil
}

func checkProfile(_ *option, v string, _ bool) error {
	if strings.EqualFold(v, "all") || strings.EqualFold(v, "none") {
		return nil
	}
	return listOf("profile", v, "energy", "task", "lustre", "network")
}

var rlimits = []string{"ALL", "NONE", "AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK"}

func checkPropagate(_ *option, v string, has bool) error {
	if !has {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(item)), "RLIMIT_")
		if _, err := oneOf("propagate", item, rlimits...); err != nil {
			return err
		}
	}
	return nil
}

// setSwitches is --switches=N[@max-time-to-wait]: at most N leaf
// switches under the job's nodes, held out for up to the wait.
func setSwitches(st *state, v string, _ bool) error {
	n, wait, hasWait := strings.Cut(v, "@")
	if !isDigits(n) {
		return errorf("Invalid --switches specification: %s", v)
	}
	count, err := strconv.Atoi(n)
	if err != nil {
		return errorf("Invalid --switches specification: %s", v)
	}
	var secs int64
	if hasWait {
		if secs, err = parseTime("switches", wait); err != nil || secs < 0 {
			return errorf("Invalid --switches specification: %s", v)
		}
	}
	st.spec.Switches, st.spec.SwitchWait = count, secs
	return nil
}

func checkExtraNodeInfo(_ *option, v string, _ bool) error {
	parts := strings.Split(v, ":")
	if len(parts) > 3 {
		return errorf("Invalid --extra-node-info specification: %s", v)
	}
	for _, p := range parts {
		if p == "*" {
			continue
		}
		lo, hi, isRange := strings.Cut(p, "-")
		if !isDigits(lo) || (isRange && !isDigits(hi)) {
			return errorf("Invalid --extra-node-info specification: %s", v)
		}
	}
	return nil
}

func checkMemBind(_ *option, v string, _ bool) error {
	for _, item := range strings.Split(v, ",") {
		kind, list, hasList := strings.Cut(strings.ToLower(item), ":")
		switch kind {
		case "quiet", "verbose", "none", "no", "rank", "local", "sort", "nosort", "prefer":
			if hasList {
				return errorf("Invalid --mem-bind specification: %s", v)
			}
		case "map_mem", "mask_mem", "map_ldom", "mask_ldom":
			if !hasList || list == "" {
				return errorf("Invalid --mem-bind specification: %s", v)
			}
		default:
			return errorf("Invalid --mem-bind specification: %s", v)
		}
	}
	return nil
}

func checkGPUBind(_ *option, v string, _ bool) error {
	for _, item := range strings.Split(v, ",") {
		kind, arg, hasArg := strings.Cut(strings.ToLower(item), ":")
		switch kind {
		case "verbose", "closest", "none":
			if hasArg {
				return errorf("Invalid --gpu-bind specification: %s", v)
			}
		case "map_gpu", "mask_gpu":
			if !hasArg || arg == "" {
				return errorf("Invalid --gpu-bind specification: %s", v)
			}
		case "per_task", "single":
			if !isDigits(arg) {
				return errorf("Invalid --gpu-bind specification: %s", v)
			}
		default:
			return errorf("Invalid --gpu-bind specification: %s", v)
		}
	}
	return nil
}

func checkGPUFreq(_ *option, v string, _ bool) error {
	value := func(s string) bool {
		if isDigits(s) {
			return true
		}
		_, err := oneOf("gpu-freq", s, "low", "medium", "high", "highm1")
		return err == nil
	}
	for _, item := range strings.Split(v, ",") {
		k, val, hasEq := strings.Cut(strings.ToLower(item), "=")
		switch {
		case !hasEq && (k == "verbose" || value(k)):
		case hasEq && (k == "memory" || k == "graphics") && value(val):
		default:
			return errorf("Invalid --gpu-freq specification: %s", v)
		}
	}
	return nil
}

// setComm is Tide's --comm=model|data.
func setComm(st *state, v string, _ bool) error {
	c, err := oneOf("comm", v, "model", "data")
	if err != nil {
		return err
	}
	st.spec.Comm = c
	return nil
}
