package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		positive bool
		want     int
		err      string
	}{
		{name: "plain", in: "4", positive: true, want: 4},
		{name: "zero allowed when not positive", in: "0", want: 0},
		{name: "zero refused when positive", in: "0", positive: true, err: `Invalid numeric value "0" for --ntasks.`},
		{name: "negative", in: "-3", err: `Invalid numeric value "-3" for --ntasks.`},
		{name: "letters", in: "4x", positive: true, err: `Invalid numeric value "4x" for --ntasks.`},
		{name: "empty", in: "", positive: true, err: `Invalid numeric value "" for --ntasks.`},
		{name: "larger than an int", in: "3000000000", err: "Numeric argument (3000000000) too big for --ntasks."},
		{name: "overflows int64", in: "99999999999999999999", err: "Numeric argument (99999999999999999999) too big for --ntasks."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInt("--ntasks", tt.in, tt.positive)
			if errText(err) != tt.err || got != tt.want {
				t.Errorf("parseInt(%q) = %d, %q; want %d, %q", tt.in, got, errText(err), tt.want, tt.err)
			}
		})
	}
}

func TestParseNodeCount(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		lo, hi int
		bad    bool
	}{
		{name: "single", in: "2", lo: 2},
		{name: "range", in: "2-4", lo: 2, hi: 4},
		{name: "equal range is a single count", in: "3-3", lo: 3},
		{name: "k suffix", in: "1k", lo: 1024},
		{name: "backwards range", in: "4-2", bad: true},
		{name: "zero", in: "0", bad: true},
		{name: "empty minimum is 1, as Slurm reads -N-3", in: "-3", lo: 1, hi: 3},
		{name: "empty minimum with max 1", in: "-1", lo: 1},
		{name: "empty minimum and maximum", in: "-", bad: true},
		{name: "negative maximum", in: "2--3", bad: true},
		{name: "junk", in: "two", bad: true},
		{name: "open range", in: "2-", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi, err := parseNodeCount(tt.in)
			if tt.bad {
				if want := "invalid node count `" + tt.in + "'"; errText(err) != want {
					t.Errorf("error = %q, want %q", errText(err), want)
				}
				return
			}
			if err != nil || lo != tt.lo || hi != tt.hi {
				t.Errorf("parseNodeCount(%q) = %d, %d, %v; want %d, %d", tt.in, lo, hi, err, tt.lo, tt.hi)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{name: "default unit is MB", in: "500", want: 500, ok: true},
		{name: "zero", in: "0", want: 0, ok: true},
		{name: "kilobytes round up", in: "1500K", want: 2, ok: true},
		{name: "lower-case k", in: "1024k", want: 1, ok: true},
		{name: "megabytes", in: "64M", want: 64, ok: true},
		{name: "gigabytes", in: "4G", want: 4096, ok: true},
		{name: "lower-case g", in: "2g", want: 2048, ok: true},
		{name: "terabytes", in: "1T", want: 1048576, ok: true},
		{name: "no decimals", in: "1.5G"},
		{name: "negative", in: "-1"},
		{name: "unknown suffix", in: "4GB"},
		{name: "empty", in: ""},
		{name: "suffix alone", in: "G"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseSize(tt.in)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseGPUCount(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want gpuReq
		err  string
	}{
		{name: "count", in: "4", want: gpuReq{Count: 4}},
		{name: "type and count", in: "a100:2", want: gpuReq{Type: "a100", Count: 2}},
		{name: "type alone is one", in: "h100", want: gpuReq{Type: "h100", Count: 1}},
		{name: "gpu prefix tolerated", in: "gpu:a100:2", want: gpuReq{Type: "a100", Count: 2}},
		{name: "gpu alone is one of any model", in: "gpu", want: gpuReq{Count: 1}},
		{name: "gpu is no model", in: "gpu:gpu:3", want: gpuReq{Count: 3}},
		{name: "zero", in: "0", want: gpuReq{}},
		{name: "bad count", in: "a100:x", err: "Invalid --gpus specification: a100:x"},
		{name: "negative", in: "-1", err: "Invalid --gpus specification: -1"},
		{name: "several types", in: "a100:1,v100:1", err: "Invalid --gpus specification: a100:1,v100:1: Tide supports one GPU type per job"},
		{name: "too many fields", in: "a:b:c:1", err: "Invalid --gpus specification: a:b:c:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGPUCount("gpus", tt.in)
			if errText(err) != tt.err || got != tt.want {
				t.Errorf("parseGPUCount(%q) = %+v, %q; want %+v, %q", tt.in, got, errText(err), tt.want, tt.err)
			}
		})
	}
}

func TestParseGres(t *testing.T) {
	const bad = "Invalid generic resource (gres) specification"
	gpu := func(typ string, n int) gresReq { return gresReq{GPU: gpuReq{Type: typ, Count: n}, HasGPU: true} }
	tests := []struct {
		name string
		in   string
		want gresReq
		err  string
	}{
		{name: "gpu count", in: "gpu:4", want: gpu("", 4)},
		{name: "gpu type and count", in: "gpu:a100:2", want: gpu("a100", 2)},
		{name: "gpu type is one", in: "gpu:a100", want: gpu("a100", 1)},
		{name: "bare gpu is one", in: "gpu", want: gpu("", 1)},
		{name: "gpu is no model", in: "gpu:gpu:2", want: gpu("", 2)},
		{name: "gres prefix", in: "gres/gpu:2", want: gpu("", 2)},
		{name: "same type twice adds up", in: "gpu:a100:1,gpu:a100:2", want: gpu("a100", 3)},
		{name: "none clears", in: "none"},
		{name: "shard", in: "shard:3", want: gresReq{Shards: 3}},
		{name: "shard with type", in: "gres/shard:h100:2", want: gresReq{Shards: 2}},
		{name: "mps", in: "mps:25", want: gresReq{MPS: 25}},
		{name: "mps over 100", in: "mps:150", err: bad},
		{name: "two mps add up over 100", in: "mps:60,mps:60", err: bad + ": mps:60,mps:60: mps is a percentage of one GPU (at most 100)"},
		{name: "shard without count", in: "shard", err: bad},
		{name: "shard zero", in: "shard:0", err: bad},
		{name: "gpu and mps", in: "gpu:1,mps:10", err: bad + ": gpu:1,mps:10: gpu cannot be combined with shard or mps; use --gpus=N with --gres=shard:N or --gres=mps:PCT for N slices"},
		{name: "shard and mps", in: "shard:1,mps:10", err: bad + ": shard:1,mps:10: shard and mps cannot be combined; use --gpu-mem with --gpu-compute"},
		{name: "other gres after gpu", in: "gpu:1,nvme:1", err: bad},
		{name: "bad count", in: "gpu:a100:x", err: bad},
		{name: "empty", in: "", err: bad},
		{name: "two types", in: "gpu:a100:1,gpu:h100:1", err: bad + ": gpu:a100:1,gpu:h100:1: Tide supports one GPU type per job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGres(tt.in)
			if errText(err) != tt.err || got != tt.want {
				t.Errorf("parseGres(%q) = %+v, %q; want %+v, %q", tt.in, got, errText(err), tt.want, tt.err)
			}
		})
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *api.SignalSpec
		resv bool
		bad  bool
	}{
		{name: "name defaults to 60 s", in: "USR1", want: &api.SignalSpec{Signal: 10, Seconds: 60}},
		{name: "SIG prefix and time", in: "SIGTERM@120", want: &api.SignalSpec{Signal: 15, Seconds: 120}},
		{name: "lower case", in: "sigusr2@5", want: &api.SignalSpec{Signal: 12, Seconds: 5}},
		{name: "number", in: "10@30", want: &api.SignalSpec{Signal: 10, Seconds: 30}},
		{name: "batch only", in: "B:USR1@90", want: &api.SignalSpec{Signal: 10, Seconds: 90, BatchOnly: true}},
		{name: "reservation flag", in: "R:INT", want: &api.SignalSpec{Signal: 2, Seconds: 60}, resv: true},
		{name: "both flags", in: "RB:HUP", want: &api.SignalSpec{Signal: 1, Seconds: 60, BatchOnly: true}, resv: true},
		{name: "unknown name", in: "FOO", bad: true},
		{name: "zero", in: "0", bad: true},
		{name: "bad flag", in: "X:USR1", bad: true},
		{name: "bad time", in: "USR1@soon", bad: true},
		{name: "time too large", in: "USR1@70000", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, resv, err := parseSignal(tt.in)
			if tt.bad {
				if errText(err) != "Invalid --signal specification" {
					t.Errorf("parseSignal(%q) error = %q", tt.in, errText(err))
				}
				return
			}
			if err != nil || resv != tt.resv {
				t.Fatalf("parseSignal(%q) = resv %v, err %v", tt.in, resv, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		err  bool
	}{
		{name: "minutes", in: "90", want: 5400},
		{name: "minutes:seconds", in: "1:30", want: 90},
		{name: "hours:minutes:seconds", in: "2:00:00", want: 7200},
		{name: "days-hours", in: "1-2", want: 93600},
		{name: "days-hours:minutes", in: "1-0:30", want: 88200},
		{name: "days-hours:minutes:seconds", in: "2-00:00:10", want: 172810},
		{name: "unlimited", in: "UNLIMITED", want: api.Infinite},
		{name: "infinite", in: "infinite", want: api.Infinite},
		{name: "zero means no limit", in: "0", want: api.Infinite},
		{name: "zero clock means no limit", in: "00:00:00", want: api.Infinite},
		{name: "junk", in: "1h", err: true},
		{name: "too many fields", in: "1:2:3:4", err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTime("time", tt.in)
			if tt.err {
				if errText(err) != "Invalid --time specification" {
					t.Errorf("parseTime(%q) error = %q", tt.in, errText(err))
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseTime(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseHostFile(t *testing.T) {
	got, err := parseHostFile("nodefile", "hosts", []byte("gpu[01-02] # first rack\n\n  gpu05\ncpu1 cpu2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu01", "gpu02", "gpu05", "cpu1", "cpu2"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseHostFile("nodefile", "hosts", []byte("# nothing\n")); err == nil {
		t.Error("an empty node file was accepted")
	}
}
