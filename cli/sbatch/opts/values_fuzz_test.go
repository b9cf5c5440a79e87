package opts

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// FuzzParseSize checks --mem, --mem-per-cpu, --mem-per-gpu and
// --gpu-mem: never negative (n+div-1 overflowed for
// "9223372036854775807K"), and the same megabytes as the controller's
// api.ParseMemMB for every size up to api.MaxMemMB.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"500", "0", "1500K", "1024k", "64M", "4G", "2g", "1T", "1.5G", "-1", "4GB", "", "G", " 8G ",
		"9223372036854775807K", "9223372036854775807", "9223372036854775807M", "9007199254740993K",
		"8796093022208T", "8796093022207T", "1099511627776", "1099511627777K", "+5", "5\x00", "\xffG", "٣G",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mb, ok := parseSize(s)
		if !ok {
			return
		}
		if mb < 0 {
			t.Fatalf("parseSize(%q) = %d", s, mb)
		}
		if mb > api.MaxMemMB {
			return // beyond what ParseMemMB takes (the controller refuses it)
		}
		want, err := api.ParseMemMB(s)
		if err != nil || want != mb {
			t.Fatalf("parseSize(%q) = %d, api.ParseMemMB = %d, %v", s, mb, want, err)
		}
	})
}

// FuzzParseGres checks --gres: counts within 32 bits, mps a percentage,
// GPUs never mixed with shards or mps, a valid model name; refusals are
// ErrInvalidArgument.
func FuzzParseGres(f *testing.F) {
	for _, s := range []string{
		"gpu:4", "gpu:a100:2", "gpu:a100", "gpu", "gres/gpu:2", "gpu:a100:1,gpu:a100:2", "none", "shard:3",
		"gres/shard:h100:2", "mps:25", "mps:150", "mps:60,mps:60", "shard", "shard:0", "gpu:1,mps:10", "shard:1,mps:10",
		"gpu:1,nvme:1", "gpu:a100:x", "", "gpu:a100:1,gpu:h100:1", "gpu:2147483647,gpu:2147483647",
		"shard:2147483647,shard:1", "gpu:2147483648", "gpu:1a:1", "gpu::1", "gpu:a100:1:1", " gpu : 1 ", "gres:gpu",
		"gpu:\x00", "gpu:\xff", "GPU:1", "mps:100,mps:1", "shard:a:b:1", "gpu:gpu:2", "gpu:GPU",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseGres(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseGres(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if r.GPU.Count < 0 || r.GPU.Count > math.MaxInt32 || r.Shards < 0 || r.Shards > math.MaxInt32 ||
			r.MPS < 0 || r.MPS > 100 || r.HasGPU && (r.Shards > 0 || r.MPS > 0) || r.Shards > 0 && r.MPS > 0 ||
			!validGPUType(r.GPU.Type) || !r.HasGPU && r.GPU != (gpuReq{}) || strings.EqualFold(r.GPU.Type, "gpu") {
			t.Fatalf("parseGres(%q) = %+v", s, r)
		}
	})
}

// FuzzParseGPUCount checks the [type:]N of --gpus, --gpus-per-node and
// --gpus-per-task: a count within 32 bits and a valid model, which
// "type:count" gives back.
func FuzzParseGPUCount(f *testing.F) {
	for _, s := range []string{
		"4", "a100:2", "h100", "gpu:a100:2", "0", "a100:x", "-1", "a100:1,v100:1", "a:b:c:1", "2147483647",
		"2147483648", "a100:99999999999999999999", "gpu", "gpu:4", ":1", "a100:", "a.1_-x:1", "1a:1", "\x00", "\xff:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseGPUCount("gpus", s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseGPUCount(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if r.Count < 0 || r.Count > math.MaxInt32 || !validGPUType(r.Type) {
			t.Fatalf("parseGPUCount(%q) = %+v", s, r)
		}
		text := strconv.Itoa(r.Count)
		if r.Type != "" {
			text = r.Type + ":" + text
		}
		back, err := parseGPUCount("gpus", text)
		if err != nil || back != r {
			t.Fatalf("parseGPUCount(%q) = %+v written as %q reads back as %+v, %v", s, r, text, back, err)
		}
	})
}

// FuzzParseSignal checks --signal: a signal from 1 to 64 and a time
// Slurm's 16 bits hold, whatever the digits say.
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{
		"USR1", "SIGTERM@120", "sigusr2@5", "10@30", "B:USR1@90", "R:INT", "RB:HUP", "FOO", "0", "X:USR1", "USR1@soon",
		"USR1@70000", "65", "64@65535", "BB:1", "BR:1", ":1", "B:", "@", "1@", "1@-1", "1@+1", "1@99999999999999999999",
		"SIGSIGUSR1", "sig", "\x00", "\xff", "B:R:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, _, err := parseSignal(s)
		if err != nil {
			if sp != nil || !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseSignal(%q) = %+v, %v", s, sp, err)
			}
			return
		}
		if sp.Signal < 1 || sp.Signal > api.MaxSignal || sp.Seconds < 0 || sp.Seconds > api.MaxSignalSeconds {
			t.Fatalf("parseSignal(%q) = %+v", s, *sp)
		}
	})
}

// FuzzParseNodeCount checks -N MIN[-MAX] with k and m suffixes: counts
// from 1 within 32 bits, MAX above MIN or 0.
func FuzzParseNodeCount(f *testing.F) {
	for _, s := range []string{
		"2", "2-4", "3-3", "1k", "4-2", "0", "-2", "two", "2-", "2147483647", "2147483648", "2047m", "2048m",
		"2097151k", "2097152k", "1-2-3", "+1", " 1 - 2 ", "1K-1M", "k", "\x00", "١",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := parseNodeCount(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseNodeCount(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if lo < 1 || lo > math.MaxInt32 || hi != 0 && (hi <= lo || hi > math.MaxInt32) {
			t.Fatalf("parseNodeCount(%q) = %d, %d", s, lo, hi)
		}
	})
}

// FuzzParseTime checks --time and --time-min as sbatch reads them (zero
// is no limit): the limit is one a job may carry.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"90", "1:30", "2:00:00", "1-2", "1-0:30", "2-00:00:10", "UNLIMITED", "infinite", "0", "00:00:00", "1h",
		"1:2:3:4", "", "0-0", "0:0:0:0", "-0", "0--0", "00000000000", "999999999-0", "0:", ":0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		secs, err := parseTime("time", s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseTime(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if secs == api.NoValue || api.CheckTimeLimit(secs) != nil {
			t.Fatalf("parseTime(%q) = %d", s, secs)
		}
	})
}
