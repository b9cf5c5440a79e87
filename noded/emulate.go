package noded

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/noded/runtime"
)

// Node emulation (tided --emulate N, issue 26): one tided process runs N
// instances of the real Daemon, each a node of its own to the
// controller (its name, registration, fake GPUs, heartbeats, launches,
// kills, reports and acknowledgements over the real node protocol, with
// a connection of its own), whose jobs run under runtime.Emulated: no
// process, cgroup or output file; a job "runs" for the duration it
// carries and then ends with exit 0 through the path a real end takes.
// It exists to drive one real controller with thousands of nodes from
// one machine (make bench-scale), not to run work.
//
// What an emulated node still writes is its job directory (launch.json,
// the script, exec.json, status.json and markers) under
// <state_dir>/emulate/<name>/jobs: the daemon's own bookkeeping, which
// the emulation keeps so that the daemon it exercises is the real one.
// Put state_dir on tmpfs (the default /run/tided is).

// EmulateConfig describes the nodes one tided emulates.
type EmulateConfig struct {
	// Count is how many nodes (0: emulation off).
	Count int
	// Prefix and First name them: Prefix followed by the index, First
	// to First+Count-1, zero-padded to Width digits (emu0001…).
	Prefix string
	First  int
	// Width is the digits of the index (0: those of the fleet's highest
	// index, at least 4). Several emulators that share a controller give
	// the same width.
	Width int
	// CPUs, Memory and GPUs are what each node registers (fake GPUs of
	// GPUModel with GPUMemoryMB each).
	CPUs        int
	Memory      string
	GPUs        int
	GPUModel    string
	GPUMemoryMB int64
	// Duration is how long a job runs that carries no duration of its
	// own (runtime.EmulatedDuration).
	Duration time.Duration
	// Leaf is how many consecutive nodes share a leaf switch in the
	// topology WriteControllerYAML writes.
	Leaf int
}

// DefaultEmulateConfig returns the defaults of tided's --emulate-* flags.
func DefaultEmulateConfig() EmulateConfig {
	return EmulateConfig{Prefix: "emu", First: 1, CPUs: 64, Memory: "512G", GPUs: 8, GPUModel: "h100",
		GPUMemoryMB: 81920, Duration: time.Second, Leaf: 32}
}

// maxEmulated bounds the nodes one tided emulates.
const maxEmulated = 100000

// Validate checks every field and returns all problems at once.
func (e *EmulateConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if e.Count < 1 || e.Count > maxEmulated {
		bad("--emulate: %d nodes must be between 1 and %d", e.Count, maxEmulated)
	}
	if e.Prefix == "" || strings.ContainsAny(e.Prefix, " \t,[]/") || strings.IndexAny(e.Prefix[len(e.Prefix)-1:], "0123456789") == 0 {
		bad("--emulate-prefix: %q must be a non-empty name without spaces, commas, brackets or slashes that does not end in a digit", e.Prefix)
	}
	if e.First < 0 {
		bad("--emulate-first: %d must not be negative", e.First)
	}
	if e.Width < 0 || e.Width > 9 {
		bad("--emulate-width: %d must be between 0 and 9", e.Width)
	} else if e.Width > 0 && len(strconv.Itoa(e.First+e.Count-1)) > e.Width {
		bad("--emulate-width: %d digits cannot hold index %d", e.Width, e.First+e.Count-1)
	}
	if e.CPUs < 1 {
		bad("--emulate-cpus: %d must be at least 1", e.CPUs)
	}
	if _, err := ParseMemory(e.Memory); err != nil {
		bad("--emulate-memory: %v", err)
	}
	if e.GPUs < 0 || e.GPUs > 64 {
		bad("--emulate-gpus: %d must be between 0 and 64", e.GPUs)
	}
	if e.GPUMemoryMB < 0 {
		bad("emulated GPU memory: %d MB must not be negative", e.GPUMemoryMB)
	}
	if e.Duration < 0 {
		bad("--emulate-duration: %s must not be negative", e.Duration)
	}
	if e.Leaf < 1 {
		bad("--emulate-leaf: %d must be at least 1", e.Leaf)
	}
	return errors.Join(errs...)
}

// width is the digits of the node indices.
func (e *EmulateConfig) width() int {
	if e.Width > 0 {
		return e.Width
	}
	return max(4, len(strconv.Itoa(e.First+e.Count-1)))
}

// Name is the name of the i-th emulated node (0-based).
func (e *EmulateConfig) Name(i int) string {
	return fmt.Sprintf("%s%0*d", e.Prefix, e.width(), e.First+i)
}

// Names lists the emulated nodes in order.
func (e *EmulateConfig) Names() []string {
	out := make([]string, e.Count)
	for i := range out {
		out[i] = e.Name(i)
	}
	return out
}

// leaves are the topology's leaf switches: the i-th holds nodes
// i*Leaf … (i+1)*Leaf-1, the node's place in the tree by its index.
func (e *EmulateConfig) leaves() (names []string, members [][]string) {
	n := (e.Count + e.Leaf - 1) / e.Leaf
	w := max(2, len(strconv.Itoa(n)))
	nodes := e.Names()
	for i := range n {
		names = append(names, fmt.Sprintf("leaf%0*d", w, i+1))
		members = append(members, nodes[i*e.Leaf:min((i+1)*e.Leaf, len(nodes))])
	}
	return names, members
}

// WriteControllerYAML writes the partitions, nodes and topology
// sections of a tidectld configuration for the emulated nodes: one
// partition over all of them (default), their declared CPUs, memory and
// GPUs, and a two-level switch tree (Leaf nodes per leaf switch, one
// spine). The rest of the configuration is the caller's.
func (e *EmulateConfig) WriteControllerYAML(w io.Writer, partition string) error {
	if err := e.Validate(); err != nil {
		return err
	}
	all := hostlist.Compress(e.Names())
	var b strings.Builder
	fmt.Fprintf(&b, "partitions:\n  - {name: %s, nodes: %q, default: true, default_time: \"1:00:00\", max_time: \"7-00:00:00\"}\n", partition, all)
	fmt.Fprintf(&b, "nodes:\n  - {names: %q, cpus: %d, memory: %s, gpus: %d}\n", all, e.CPUs, e.Memory, e.GPUs)
	b.WriteString("topology:\n  switches:\n")
	names, members := e.leaves()
	for i, n := range names {
		fmt.Fprintf(&b, "    - {name: %s, nodes: %q}\n", n, hostlist.Compress(members[i]))
	}
	fmt.Fprintf(&b, "    - {name: spine, switches: %q}\n", hostlist.Compress(names))
	_, err := io.WriteString(w, b.String())
	return err
}

// nodeConfig is the i-th emulated node's configuration: base's
// controller, key, kill wait, launch timeout, features and logging, its
// own name and state directory, the fleet's CPUs, memory and fake GPUs,
// and nothing that reaches the host (no cgroups, MPS, containerd, step
// listener or usage sampling). Its heartbeat is base's spread over
// ±10 % by the node's name, so that nodes registered together do not
// keep syncing in lockstep.
func (e *EmulateConfig) nodeConfig(base Config, i int) Config {
	c := base
	c.Name = e.Name(i)
	c.StateDir = filepath.Join(base.StateDir, "emulate", c.Name)
	// Never the host's certificate: that names the host, not this node.
	c.TLSDir = filepath.Join(c.StateDir, "no-tls")
	c.Supervisor = SupervisorPerJob // no shared supervisor socket to fit
	c.CPUs, c.Memory = e.CPUs, e.Memory
	c.GPUs = GPUConfig{Source: GPUSourceNone}
	if e.GPUs > 0 {
		c.GPUs.Source = GPUSourceFake
		c.GPUs.Fake.Count, c.GPUs.Fake.Model, c.GPUs.Fake.MemoryMB = e.GPUs, e.GPUModel, e.GPUMemoryMB
	}
	c.Cgroups = CgroupsOff
	c.MPS = MPSOff
	c.Containerd.Socket = ""
	c.StepAddr = ""
	c.AcctGatherFrequency = 0
	c.OutputGrace = 0
	h := fnv.New32a()
	h.Write([]byte(c.Name))
	spread := float64(h.Sum32()%2001)/10000 - 0.1 // -10 % … +10 %
	c.Heartbeat = max(base.Heartbeat+time.Duration(float64(base.Heartbeat)*spread), 100*time.Millisecond)
	return c
}

// FleetOptions are a Fleet's collaborators; the zero value is usable.
type FleetOptions struct {
	// Logger receives every node's log (each with its node key).
	Logger *slog.Logger
	// NewAPI returns the controller's node protocol for one node and a
	// function that closes it (default: a client of its own for the
	// base configuration's controllers, with the cluster key). Tests
	// give fakes.
	NewAPI func(name string) (NodeAPI, func())
}

// Fleet is the nodes one tided emulates: a real Daemon each.
type Fleet struct {
	log     *slog.Logger
	daemons []*Daemon
	rts     []*runtime.Emulated
	closers []func()
}

// SetupFleet prepares ec.Count emulated nodes from the base
// configuration (see EmulateConfig.nodeConfig): their state
// directories, and a client each. Nothing connects yet; Run does.
func SetupFleet(ctx context.Context, base Config, ec EmulateConfig, opts FleetOptions) (*Fleet, error) {
	if err := ec.Validate(); err != nil {
		return nil, fmt.Errorf("invalid emulation:\n%w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	newAPI := opts.NewAPI
	if newAPI == nil {
		key, err := LoadKey(base.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("emulated nodes present the cluster key (key_file), not the host's certificate: %w", err)
		}
		// A client each, as every real node has: one node's held long
		// poll and its reports need connections of their own, and a
		// client keeps only a few idle ones.
		newAPI = func(string) (NodeAPI, func()) {
			c := client.NewTCPList(base.Controllers(), key)
			return c, c.Close
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find tided executable: %w", err)
	}
	f := &Fleet{log: log}
	for i := range ec.Count {
		cfg := ec.nodeConfig(base, i)
		api, closeAPI := newAPI(cfg.Name)
		rt := runtime.NewEmulated(ec.Duration)
		d, err := Setup(ctx, cfg, Options{Logger: log, API: api, Executable: exe, Runtime: rt})
		if err != nil {
			if closeAPI != nil {
				closeAPI()
			}
			f.close()
			return nil, fmt.Errorf("emulated node %s: %w", cfg.Name, err)
		}
		f.daemons = append(f.daemons, d)
		f.rts = append(f.rts, rt)
		f.closers = append(f.closers, closeAPI)
	}
	return f, nil
}

// Run runs every node until ctx ends: all register at once, as a rack
// that powers on does.
func (f *Fleet) Run(ctx context.Context) error {
	defer f.close()
	var wg sync.WaitGroup
	errs := make([]error, len(f.daemons))
	for i, d := range f.daemons {
		wg.Go(func() { errs[i] = d.Run(ctx) })
	}
	f.log.Info("emulated nodes started", "nodes", len(f.daemons))
	wg.Wait()
	return errors.Join(errs...)
}

// Daemons returns the fleet's daemons, in node order.
func (f *Fleet) Daemons() []*Daemon { return f.daemons }

// Running is how many emulated jobs run now on the whole fleet.
func (f *Fleet) Running() int {
	n := 0
	for _, rt := range f.rts {
		n += rt.Running()
	}
	return n
}

func (f *Fleet) close() {
	for _, c := range f.closers {
		if c != nil {
			c()
		}
	}
	f.closers = nil
}

// raiseNoFile lifts the soft open-file limit to the hard one: every
// emulated node holds a connection or two.
func raiseNoFile(want uint64, log *slog.Logger) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < want {
		log.Warn("open file limit too low for the emulated nodes' connections: raise it (ulimit -n)", "limit", lim.Cur, "want", want)
	}
}

// emulateFlagNames are the flags of the emulation, declared by
// addEmulateFlags on tided's root command.
const (
	flagEmulate         = "emulate"
	flagEmulatePrefix   = "emulate-prefix"
	flagEmulateFirst    = "emulate-first"
	flagEmulateWidth    = "emulate-width"
	flagEmulateGPUs     = "emulate-gpus"
	flagEmulateCPUs     = "emulate-cpus"
	flagEmulateMemory   = "emulate-memory"
	flagEmulateDuration = "emulate-duration"
	flagEmulateLeaf     = "emulate-leaf"
)

// addEmulateFlags declares the --emulate flags.
func addEmulateFlags(fs *pflag.FlagSet) {
	d := DefaultEmulateConfig()
	fs.Int(flagEmulate, 0, "emulate this many nodes in this process (for scale tests: jobs run no process)")
	fs.String(flagEmulatePrefix, d.Prefix, "name prefix of the emulated nodes")
	fs.Int(flagEmulateFirst, d.First, "index of the first emulated node")
	fs.Int(flagEmulateWidth, 0, "digits of the emulated nodes' index (0: the highest index's, at least 4)")
	fs.Int(flagEmulateGPUs, d.GPUs, "fake GPUs per emulated node")
	fs.Int(flagEmulateCPUs, d.CPUs, "CPUs per emulated node")
	fs.String(flagEmulateMemory, d.Memory, "memory per emulated node")
	fs.Duration(flagEmulateDuration, d.Duration, "how long an emulated job runs when it carries no TIDE_EMULATE or tide-emulate: duration")
	fs.Int(flagEmulateLeaf, d.Leaf, "emulated nodes per leaf switch (emulate-config's topology)")
}

// emulateFromFlags reads the --emulate flags; on is false without
// --emulate.
func emulateFromFlags(fs *pflag.FlagSet) (ec EmulateConfig, on bool, err error) {
	ec = DefaultEmulateConfig()
	if fs.Lookup(flagEmulate) == nil {
		return ec, false, nil
	}
	get := func(name string, into *int) {
		if v, e := fs.GetInt(name); e != nil {
			err = errors.Join(err, e)
		} else {
			*into = v
		}
	}
	get(flagEmulate, &ec.Count)
	get(flagEmulateFirst, &ec.First)
	get(flagEmulateWidth, &ec.Width)
	get(flagEmulateGPUs, &ec.GPUs)
	get(flagEmulateCPUs, &ec.CPUs)
	get(flagEmulateLeaf, &ec.Leaf)
	var e1, e2, e3 error
	ec.Prefix, e1 = fs.GetString(flagEmulatePrefix)
	ec.Memory, e2 = fs.GetString(flagEmulateMemory)
	ec.Duration, e3 = fs.GetDuration(flagEmulateDuration)
	err = errors.Join(err, e1, e2, e3)
	return ec, fs.Changed(flagEmulate), err
}

// runFleet is tided --emulate: SetupFleet over the effective
// configuration, then Run until the command's context ends.
func runFleet(ctx context.Context, cfg Config, ec EmulateConfig, log *slog.Logger) error {
	raiseNoFile(uint64(3*ec.Count+64), log)
	f, err := SetupFleet(ctx, cfg, ec, FleetOptions{Logger: log})
	if err != nil {
		return err
	}
	log.Info("emulating nodes", "nodes", ec.Count, "first", ec.Name(0), "last", ec.Name(ec.Count-1),
		"gpus", ec.GPUs, "controller", cfg.Controller, "state_dir", filepath.Join(cfg.StateDir, "emulate"))
	return f.Run(ctx)
}

// newEmulateConfigCommand is "tided emulate-config": the controller's
// partitions, nodes and topology for the nodes --emulate would run.
func newEmulateConfigCommand() *cobra.Command {
	var partition string
	c := &cobra.Command{
		Use:   "emulate-config --emulate N [--emulate-* ...]",
		Short: "Print tidectld's partitions, nodes and topology for the nodes tided --emulate N runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ec, on, err := emulateFromFlags(cmd.Flags())
			if err != nil {
				return err
			}
			if !on {
				return errors.New("--emulate N is required: how many nodes to describe")
			}
			return ec.WriteControllerYAML(cmd.OutOrStdout(), partition)
		},
	}
	c.Flags().StringVar(&partition, "partition", "emu", "name of the partition over the emulated nodes")
	return c
}
