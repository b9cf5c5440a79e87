// Package sim implements `tide sim`: replay a job trace through the
// production scheduler under several policies and compare them, and
// `tide sim convert`: turn `sacct -P` output into a trace.
package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	tsim "github.com/tide-hpc/tide/sim"
	"github.com/tide-hpc/tide/sim/trace"
)

// Options are tide sim's parsed command line.
type Options struct {
	IO *cmdutil.IOStreams

	Trace string
	// Config is a tidectld config file to build the cluster from,
	// instead of the generator flags (Nodes … Leaf).
	Config      string
	Nodes       int
	GPUsPerNode int
	CPUsPerNode int
	MemPerNode  string
	Leaf        int
	Window      string
	Load        float64
	QueueMap    string
	Seed        uint64
	// Seeds is --seeds ("1-5", "3,7,9"): every policy replays under
	// each; it excludes --seed (SeedSet).
	Seeds   string
	SeedSet bool
	Compare string
	JSON    string
	HTML    string
	Starve  string
	// Estimates is exact, limit or model (see sim.EstimateMode).
	Estimates string
	// GeneratorFlags names the generator flags given on the command line
	// (they and Config exclude each other).
	GeneratorFlags []string
	// Progress forces the progress line on (tests); by default it shows
	// only when stderr is a terminal, and never with Quiet (--quiet).
	Progress bool
	Quiet    bool
	// Pack runs the packing experiment (arrivals only, see sim.Pack)
	// instead of the replay.
	Pack bool
	// CPUProfile writes a CPU profile of the run to this file (hidden
	// flag, for work on the simulator's and the core's speed).
	CPUProfile string
}

// NewCmd builds `tide sim`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "sim --trace FILE [options]",
		Short: "Replay a job trace through the scheduler and compare policies",
		Long: "Replays a trace (CSV or CSV.gz in the common schema: job_id, submit_time, start_time,\n" +
			"end_time, duration, num_gpus, gpu_share, user, queue, status) on a generated cluster with\n" +
			"the production scheduling core, once per policy of --compare (fifo, backfill, easy,\n" +
			"tide, priority), and prints a comparison table. Same inputs and --seed give the same --json.\n" +
			"--seeds 1-5 replays every policy under each seed and reports the median and range of\n" +
			"every metric. Jobs ask for modelled user estimates as time limits (--estimates).\n\n" +
			"--config FILE replays on the cluster of a tidectld config instead (its nodes, partitions,\n" +
			"and switch tree; every node must declare cpus and memory) and adds the policy \"config\":\n" +
			"the file's scheduler settings (--compare fifo,backfill,config). It excludes --nodes,\n" +
			"--gpus-per-node, --cpus-per-node, --mem-per-node and --leaf.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range generatorFlags {
				if cmd.Flags().Changed(name) {
					o.GeneratorFlags = append(o.GeneratorFlags, "--"+name)
				}
			}
			o.SeedSet = cmd.Flags().Changed("seed")
			if cmd.Flags().Changed("starve") {
				fmt.Fprintln(o.IO.ErrOut, "tide sim: --starve is now --starve-bound")
			}
			return Run(o)
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	fl := cmd.Flags()
	fl.StringVar(&o.Trace, "trace", "", "trace file (.csv or .csv.gz)")
	fl.StringVar(&o.Config, "config", "", "build the cluster from a tidectld config file (YAML) instead of generating one")
	fl.IntVar(&o.Nodes, "nodes", 64, "nodes of the generated cluster")
	fl.IntVar(&o.GPUsPerNode, "gpus-per-node", 8, "GPUs per node")
	fl.IntVar(&o.CPUsPerNode, "cpus-per-node", 64, "CPUs per node")
	fl.StringVar(&o.MemPerNode, "mem-per-node", "512G", "memory per node (Slurm units: 512G, 1T, MB without unit)")
	fl.IntVar(&o.Leaf, "leaf", 16, "nodes per leaf switch of a two-level tree (0: no topology)")
	fl.StringVar(&o.Window, "window", "", "replay jobs submitted in START,END (seconds, or with unit s/m/h/d, from the trace's zero)")
	fl.Float64Var(&o.Load, "load", 1, "compress inter-arrival times by this factor (2 = twice the arrival rate)")
	fl.StringVar(&o.QueueMap, "queue-map", "", "map trace queues to partitions: QUEUE=PART,...,*=PART")
	fl.Uint64Var(&o.Seed, "seed", 1, "orders jobs submitted in the same second and draws modelled time limits")
	fl.StringVar(&o.Seeds, "seeds", "", "replay every policy under each of these seeds (1-5, 3,7,9) and report medians and ranges")
	fl.StringVar(&o.Compare, "compare", "fifo,backfill,tide", "policies to compare, comma-separated")
	fl.StringVar(&o.JSON, "json", "", "write the report as JSON to FILE (deterministic)")
	fl.StringVar(&o.HTML, "html", "", "write a self-contained HTML report with charts to FILE")
	fl.StringVar(&o.Starve, "starve-bound", "24h", "queueing delay above which a job counts as starved (seconds or 90m, 24h)")
	fl.StringVar(&o.Starve, "starve", "24h", "")
	_ = fl.MarkHidden("starve") // the old name of --starve-bound
	fl.StringVar(&o.Estimates, "estimates", string(tsim.EstimatesModel),
		"time limits the jobs ask for: exact (run time), limit (the trace's time_limit, else model) or model (user-style overestimates)")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	_ = fl.MarkHidden("cpuprofile")
	fl.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress bar on stderr (it shows only on a terminal anyway)")
	fl.BoolVar(&o.Pack, "pack", false, "packing experiment: GPU jobs arrive in order and never leave; print allocation and fragmentation per policy (compare slice placements with POLICY+firstfit)")
	cmd.AddCommand(newConvertCmd(f))
	return cmd
}

// generatorFlags are the flags that size a generated cluster.
var generatorFlags = []string{"nodes", "gpus-per-node", "cpus-per-node", "mem-per-node", "leaf"}

// Run replays the trace and writes the reports.
func Run(o *Options) error {
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	return replay(o)
}

// replay is Run without the profile.
func replay(o *Options) error {
	if o.Trace == "" {
		return cmdutil.Usagef("--trace is required")
	}
	if o.Config != "" && len(o.GeneratorFlags) > 0 {
		return cmdutil.Usagef("--config and %s exclude each other: the config file describes the cluster", strings.Join(o.GeneratorFlags, ", "))
	}
	starve, err := parseSeconds(o.Starve)
	if err != nil {
		return cmdutil.Usagef("--starve-bound: %v", err)
	}
	var seeds []uint64
	if o.Seeds != "" {
		if o.SeedSet {
			return cmdutil.Usagef("--seed and --seeds exclude each other")
		}
		if seeds, err = tsim.ParseSeeds(o.Seeds); err != nil {
			return cmdutil.Usagef("%v", err)
		}
		if o.Pack {
			return cmdutil.Usagef("--pack replays one seed: give --seed, not --seeds")
		}
	}
	from, to, err := trace.ParseWindow(o.Window)
	if err != nil {
		return cmdutil.Usagef("--window: %v", err)
	}
	qmap, err := trace.ParseQueueMap(o.QueueMap)
	if err != nil {
		return cmdutil.Usagef("--queue-map: %v", err)
	}
	if o.Load <= 0 {
		return cmdutil.Usagef("--load %v: must be positive", o.Load)
	}
	est, err := tsim.ParseEstimates(o.Estimates)
	if err != nil {
		return cmdutil.Usagef("%v", err)
	}
	cluster, cfgPolicy, err := buildCluster(o)
	if err != nil {
		return err
	}
	policies, err := tsim.ParsePoliciesWith(splitList(o.Compare), cfgPolicy)
	if err != nil {
		return cmdutil.Usagef("%v", err)
	}
	for q, part := range qmap {
		if _, ok := cluster.Partitions[part]; !ok {
			return cmdutil.Usagef("--queue-map: %s=%s: no partition %s (have %s)", q, part, part,
				strings.Join(slices.Sorted(maps.Keys(cluster.Partitions)), ", "))
		}
	}
	jobs, err := trace.Read(o.Trace, trace.Options{From: from, To: to, Load: o.Load, QueueMap: qmap})
	if err != nil {
		return err
	}
	if o.Pack {
		if o.HTML != "" {
			return cmdutil.Usagef("--pack prints a table (and --json); --html is for replays")
		}
		begin := time.Now()
		rs, err := tsim.PackCompare(jobs, cluster, policies, o.Seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Out, "packing %s on %d nodes (%d GPUs): GPU jobs arrive in order, never leave\n\n",
			o.Trace, len(cluster.Nodes), cluster.TotalGPUs())
		if err := tsim.WritePackTable(o.IO.Out, rs, 0); err != nil {
			return err
		}
		if !o.Quiet {
			fmt.Fprintf(o.IO.ErrOut, "(%s)\n", time.Since(begin).Round(time.Millisecond))
		}
		if o.JSON != "" {
			return writeFile(o.JSON, func(w io.Writer) error {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rs)
			})
		}
		return nil
	}

	co := tsim.CompareOptions{Cluster: cluster, Policies: policies, Seed: o.Seed, Seeds: seeds, StarveAfter: starve,
		TraceName: o.Trace, Estimates: est}
	var bar *progress
	if !o.Quiet && (o.Progress || stderrIsTerminal(o.IO.ErrOut)) {
		bar = newProgress(o.IO.ErrOut, time.Now)
		co.Progress = bar.update
	}
	rep, err := tsim.Compare(jobs, co)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return err
	}
	if err := rep.WriteText(o.IO.Out); err != nil {
		return err
	}
	if o.JSON != "" {
		if err := writeFile(o.JSON, rep.WriteJSON); err != nil {
			return err
		}
	}
	if o.HTML != "" {
		if err := writeFile(o.HTML, rep.WriteHTML); err != nil {
			return err
		}
	}
	return nil
}

// buildCluster reads --config, or generates the cluster of the generator
// flags; the policy is the config's (nil when generated).
func buildCluster(o *Options) (*tsim.Cluster, *tsim.PolicySpec, error) {
	if o.Config != "" {
		c, p, err := tsim.LoadConfig(o.Config)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, cmdutil.Usagef("--config: %v", err)
		}
		return c, &p, nil
	}
	mem, err := api.ParseMemMB(o.MemPerNode)
	if err != nil {
		return nil, nil, cmdutil.Usagef("--mem-per-node: %v", err)
	}
	c, err := tsim.Generate(tsim.ClusterSpec{Nodes: o.Nodes, GPUsPerNode: o.GPUsPerNode,
		CPUsPerNode: o.CPUsPerNode, MemPerNodeMB: mem, Leaf: o.Leaf})
	if err != nil {
		return nil, nil, cmdutil.Usagef("%v", err)
	}
	return c, nil, nil
}

// writeFile writes a report through a temporary file, so that a failed
// run never leaves half a report.
func writeFile(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseSeconds reads whole seconds ("1800") or a Go duration ("30m").
func parseSeconds(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%q is not a duration of at least 1s (1800, 30m, 2h)", s)
	}
	return int64(d / time.Second), nil
}

// stderrIsTerminal says whether the progress bar may draw on w (tests
// replace it).
var stderrIsTerminal = isTerminal

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws one updating line on stderr: a bar, the jobs done,
// and once it can tell, the time left at the rate so far.
type progress struct {
	w   io.Writer
	now func() time.Time
	// start is the first update's time; drawn the last draw's, pct its
	// percentage and width its length (a shorter line pads over it).
	start, drawn time.Time
	pct, width   int
	// total is the last update's total: jobs times replays.
	total int
	any   bool
}

// newProgress starts a progress line on w.
func newProgress(w io.Writer, now func() time.Time) *progress {
	return &progress{w: w, now: now, start: now()}
}

// redrawEvery is how often the line redraws, to move the ETA, when the
// percentage stands still.
const redrawEvery = time.Second

// etaAfter is how long the line waits before it estimates the time left:
// the first seconds (reading the trace, the first replays' start) say
// little about the rate.
const etaAfter = 2 * time.Second

func (p *progress) update(done, total int) {
	if total == 0 {
		return
	}
	now := p.now()
	pct := done * 100 / total
	if p.any && pct == p.pct && now.Sub(p.drawn) < redrawEvery {
		return
	}
	p.pct, p.drawn, p.total, p.any = pct, now, total, true
	// The line stays under 80 columns: a wrapped line breaks the \r redraw.
	const width = 20
	fill := pct * width / 100
	line := fmt.Sprintf("simulating [%s%s] %3d%% (%d/%d job runs)", strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct, done, total)
	if el := now.Sub(p.start); done > 0 && done < total && el >= etaAfter {
		left := time.Duration(float64(el) * float64(total-done) / float64(done))
		line += ", ETA " + formatETA(left)
	}
	p.draw(line)
}

// draw writes line over the previous one.
func (p *progress) draw(line string) {
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// done ends the line with the time the run took.
func (p *progress) done() {
	if !p.any {
		return
	}
	p.draw(fmt.Sprintf("simulated %d job runs in %s", p.total, formatETA(p.now().Sub(p.start))))
	fmt.Fprintln(p.w)
}

// formatETA prints a duration to the second: 45s, 3m05s, 1h02m.
func formatETA(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}

// newConvertCmd builds `tide sim convert`.
func newConvertCmd(f *cmdutil.Factory) *cobra.Command {
	var out, tz, queueFrom string
	var strict bool
	cmd := &cobra.Command{
		Use:   "convert [SACCT_FILE|-]",
		Short: "Convert sacct -P output into a trace CSV",
		Long: "Reads the output of\n  sacct -a -P -X --format=" + trace.SacctFormat + "\n" +
			"(from a file or stdin) and writes a trace in the common schema, with the optional\n" +
			"columns time_limit, num_cpus and censored (jobs still pending or running when sacct ran).\n" +
			"A row that cannot be read is reported with its line on stderr and left out; --strict\n" +
			"fails on it instead.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			loc := time.Local
			if tz != "" {
				l, err := time.LoadLocation(tz)
				if err != nil {
					return cmdutil.Usagef("--tz: %v", err)
				}
				loc = l
			}
			if queueFrom != trace.QueueFromPartition && queueFrom != trace.QueueFromAccount {
				return cmdutil.Usagef("--queue-from %q: want %s or %s", queueFrom, trace.QueueFromPartition, trace.QueueFromAccount)
			}
			in, name := f.IO.In, "stdin"
			if len(args) == 1 && args[0] != "-" {
				fh, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("convert: %w", err)
				}
				defer fh.Close()
				in, name = fh, args[0]
			}
			skipped := 0
			jobs, err := trace.ConvertSacct(in, name, trace.ConvertOptions{Loc: loc, QueueFrom: queueFrom, Strict: strict,
				Skipped: func(err error) {
					skipped++
					fmt.Fprintf(f.IO.ErrOut, "tide sim convert: %v (row left out)\n", err)
				},
				Note: func(s string) { fmt.Fprintf(f.IO.ErrOut, "tide sim convert: %s\n", s) },
			})
			if err != nil {
				return err
			}
			if skipped > 0 {
				fmt.Fprintf(f.IO.ErrOut, "tide sim convert: left out %d bad row(s) of %d (--strict fails on the first)\n", skipped, skipped+len(jobs))
			}
			if out == "" || out == "-" {
				return trace.Write(f.IO.Out, jobs)
			}
			return writeFile(out, func(w io.Writer) error { return trace.Write(w, jobs) })
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the trace to FILE (default stdout)")
	cmd.Flags().StringVar(&tz, "tz", "", "time zone of sacct's timestamps (default: local)")
	cmd.Flags().StringVar(&queueFrom, "queue-from", trace.QueueFromPartition, "take each job's queue from its partition or account")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on the first row that cannot be read instead of leaving it out")
	return cmd
}
