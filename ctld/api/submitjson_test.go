package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkSubmitJSON fails t unless AppendJSON writes exactly what
// json.Marshal does, after a prefix that it must leave alone.
func checkSubmitJSON(t *testing.T, name string, r *SubmitRequest) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	prefix := []byte("prefix:")
	got, err := r.AppendJSON(prefix)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: AppendJSON error %v, json.Marshal error %v", name, err, wantErr)
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%s: AppendJSON lost the prefix: %q", name, got)
	}
	if got := got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON differs from json.Marshal at byte %d\n got: %s\nwant: %s",
			name, firstDiff(got, want), got, want)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestSubmitJSONMatchesEncodingJSON(t *testing.T) {
	fixed := []struct {
		name string
		r    *SubmitRequest
	}{
		{"nil", nil},
		{"zero", &SubmitRequest{}},
		{"test only", &SubmitRequest{TestOnly: true}},
		{"typical", typicalSubmit()},
		{"requeue false", &SubmitRequest{Spec: JobSpec{Requeue: new(bool)}}},
		{"zero signal", &SubmitRequest{Spec: JobSpec{Signal: &SignalSpec{}}}},
		{"empty slices", &SubmitRequest{Spec: JobSpec{ScriptArgs: []string{}, Environment: []string{}, ContainerMounts: []ContainerMount{}}}},
		{"zero mount", &SubmitRequest{Spec: JobSpec{ContainerMounts: []ContainerMount{{}}}}},
		{"zero time in a zone", &SubmitRequest{Spec: JobSpec{BeginTime: time.Time{}.In(time.FixedZone("X", -3600))}}},
		{"time with monotonic clock", &SubmitRequest{Spec: JobSpec{BeginTime: time.Now()}}},
		{"mem whole node", &SubmitRequest{Spec: JobSpec{MemPerNodeMB: MemWholeNode, Priority: math.MaxUint32}}},
	}
	for _, tc := range fixed {
		checkSubmitJSON(t, tc.name, tc.r)
	}

	// Every field non-zero, so that a field AppendJSON does not know
	// shows up in json.Marshal's output only; then fields zeroed at
	// random, for the omitempty and omitzero paths.
	for _, zeroOdds := range []int{0, 3} {
		for seed := range uint64(2000) {
			f := filler{t: t, rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds))), zeroOdds: zeroOdds}
			var r SubmitRequest
			f.fill(reflect.ValueOf(&r).Elem(), "SubmitRequest")
			checkSubmitJSON(t, fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds), &r)
		}
	}
}

// filler sets every settable field of a value, recursively, to
// pseudo-random values. With zeroOdds 0 no value it sets is zero; with
// zeroOdds n about one value in n is left or made zero.
type filler struct {
	t        *testing.T
	rng      *rand.Rand
	zeroOdds int
	// pieces make up strings (fillerPieces when nil), times are in
	// zones (fillerZones when nil).
	pieces []string
	zones  []*time.Location
}

// Pieces of strings: plain ASCII, what encoding/json escapes (quotes,
// backslashes, HTML's < > &, every control byte, U+2028/U+2029), what it
// passes through (DEL, multi-byte UTF-8) and invalid UTF-8 (stray
// continuation, truncated sequence, encoded surrogate, above U+10FFFF).
var fillerPieces = func() []string {
	p := []string{
		"a", "job-42", "/home/alice/run dir", "PATH=/usr/bin:/bin",
		"<script>", "a&b", ">", `"quoted"`, `back\slash`, `\"`,
		"\x7f", "\u2028", "\u2029", "é", "日本語", "😀", "\u00a0", "\ufffd",
		"\x80", "\xff", "\xc3", "\xe6\x97", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
	}
	for c := range 0x20 {
		p = append(p, string(rune(c)))
	}
	return p
}()

// fillerZones are offsets east and west, odd minutes and seconds (which
// RFC 3339 drops), UTC and Local.
var fillerZones = []*time.Location{
	time.UTC, time.Local,
	time.FixedZone("CET", 3600), time.FixedZone("", -8*3600),
	time.FixedZone("IST", 5*3600+1800), time.FixedZone("", 14*3600),
	time.FixedZone("", -12*3600), time.FixedZone("odd", -(3*3600 + 20*60 + 15)),
	time.FixedZone("late", 23*3600+59*60),
}

func (f *filler) zero() bool { return f.zeroOdds > 0 && f.rng.IntN(f.zeroOdds) == 0 }

func (f *filler) fill(v reflect.Value, path string) {
	if f.zero() {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.string())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
		n := []int64{1, -1, 42, -3600, lo, hi, lo + 1, hi - 1, int64(f.rng.Uint64())>>(64-bits) | 1}[f.rng.IntN(9)]
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := v.Type().Bits()
		hi := uint64(math.MaxUint64) >> (64 - bits)
		n := []uint64{1, 10, hi, hi - 1, f.rng.Uint64()>>(64-bits) | 1}[f.rng.IntN(5)]
		v.SetUint(n)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path)
	case reflect.Slice:
		n := 1 + f.rng.IntN(4)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(f.time()))
			return
		}
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() {
				f.fill(v.Field(i), path+"."+sf.Name)
			}
		}
	default:
		f.t.Fatalf("%s: no filler for kind %s; teach the filler and AppendJSON about it", path, v.Kind())
	}
}

// string is never empty: an empty piece could make a non-zero fill
// zero.
func (f *filler) string() string {
	var sb strings.Builder
	pieces := f.pieces
	if pieces == nil {
		pieces = fillerPieces
	}
	for range 1 + f.rng.IntN(5) {
		sb.WriteString(pieces[f.rng.IntN(len(pieces))])
	}
	return sb.String()
}

// time is never the zero time, with nanoseconds that have trailing zeros
// to trim or none, within the years RFC 3339 can spell.
func (f *filler) time() time.Time {
	year := []int{0, 1, 1970, 2026, 9999, f.rng.IntN(10000)}[f.rng.IntN(6)]
	nsec := []int{0, 1, 1000, 500_000_000, 123_456_789, f.rng.IntN(1e9)}[f.rng.IntN(6)]
	zones := f.zones
	if zones == nil {
		zones = fillerZones
	}
	loc := zones[f.rng.IntN(len(zones))]
	t := time.Date(year, time.Month(1+f.rng.IntN(12)), 1+f.rng.IntN(31),
		f.rng.IntN(24), f.rng.IntN(60), f.rng.IntN(60), nsec, loc)
	if t.IsZero() {
		t = t.Add(time.Nanosecond)
	}
	return t
}

// TestSubmitJSONTimeErrors checks that AppendJSON fails where
// json.Marshal does, with the same error, and leaves the buffer as it
// was.
func TestSubmitJSONTimeErrors(t *testing.T) {
	tests := []struct {
		name    string
		t       time.Time
		wantErr bool
	}{
		{"year 0", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), false},
		{"year -1", time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), true},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"year 10000 west of UTC", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).In(time.FixedZone("", -3600)), false},
		{"year 0 west of UTC", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).In(time.FixedZone("", -3600)), true},
		{"offset 23:59", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60)), false},
		{"offset +24:00", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)), true},
		{"offset -24:00", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", -24*3600)), true},
		{"offset +100:00", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 100*3600)), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &SubmitRequest{Spec: JobSpec{Name: "x", BeginTime: tc.t}}
			want, wantErr := json.Marshal(r)
			if (wantErr != nil) != tc.wantErr {
				t.Fatalf("json.Marshal error %v, want error %v", wantErr, tc.wantErr)
			}
			prefix := []byte("prefix:")
			got, err := r.AppendJSON(prefix)
			if wantErr != nil {
				var me *json.MarshalerError
				if err == nil || err.Error() != wantErr.Error() || !errors.As(err, &me) {
					t.Fatalf("AppendJSON error %v, want %v", err, wantErr)
				}
				if string(got) != string(prefix) {
					t.Fatalf("AppendJSON returned %q on error, want the prefix alone", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("AppendJSON error %v", err)
			}
			if got := got[len(prefix):]; !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// typicalSubmit is what sbatch --wrap sends from a login shell.
func typicalSubmit() *SubmitRequest {
	env := []string{
		"SHELL=/bin/bash",
		"HOSTNAME=login01.cluster.example.org",
		"HISTSIZE=1000",
		"USER=alice",
		"HOME=/home/alice",
		"LOGNAME=alice",
		"LANG=en_US.UTF-8",
		"TERM=xterm-256color",
		"PWD=/home/alice/projects/llm-finetune",
		"OLDPWD=/home/alice",
		"MAIL=/var/spool/mail/alice",
		"PATH=/home/alice/.local/bin:/opt/tide/bin:/usr/local/bin:/usr/bin:/usr/local/sbin:/usr/sbin",
		"LD_LIBRARY_PATH=/usr/local/cuda-12.4/lib64:/opt/nccl/lib",
		"CUDA_HOME=/usr/local/cuda-12.4",
		"CONDA_DEFAULT_ENV=finetune",
		"CONDA_PREFIX=/home/alice/miniconda3/envs/finetune",
		"CONDA_EXE=/home/alice/miniconda3/bin/conda",
		"CONDA_PYTHON_EXE=/home/alice/miniconda3/bin/python",
		"PYTHONPATH=/home/alice/projects/llm-finetune/src",
		"HF_HOME=/scratch/alice/hf-cache",
		"TRANSFORMERS_CACHE=/scratch/alice/hf-cache/transformers",
		"WANDB_PROJECT=llm-finetune",
		"WANDB_MODE=offline",
		"OMP_NUM_THREADS=8",
		"NCCL_DEBUG=WARN",
		"SSH_CLIENT=10.0.12.34 51234 22",
		"SSH_CONNECTION=10.0.12.34 51234 10.0.0.5 22",
		"SSH_TTY=/dev/pts/3",
		"XDG_SESSION_ID=4711",
		"XDG_RUNTIME_DIR=/run/user/1000",
		"MODULEPATH=/etc/modulefiles:/usr/share/modulefiles:/opt/modulefiles",
		"LOADEDMODULES=gcc/13.2:cuda/12.4:openmpi/5.0",
		"EDITOR=vim",
		"LESSOPEN=||/usr/bin/lesspipe.sh %s",
		"_=/opt/tide/bin/sbatch",
	}
	return &SubmitRequest{Spec: JobSpec{
		Name:        "wrap",
		Partition:   "gpu",
		Script:      "#!/bin/sh\n# This script was created by sbatch --wrap.\n\npython train.py --epochs 3 --lr 2e-5 --data \"/scratch/alice/data\" > train.log 2>&1\n",
		WorkDir:     "/home/alice/projects/llm-finetune",
		SubmitDir:   "/home/alice/projects/llm-finetune",
		SubmitHost:  "login01",
		Environment: env,
		Nodes:       1,
		Tasks:       1,
		CPUsPerTask: 8,
		GPUs:        2,
		TimeLimit:   4 * 3600,
		Stdout:      "slurm-%j.out",
	}}
}

func BenchmarkSubmitJSON(b *testing.B) {
	r := typicalSubmit()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.AppendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSubmitResponseDecodeJSON: the common answer, read by hand, and every
// other answer decode as encoding/json decodes them.
func TestSubmitResponseDecodeJSON(t *testing.T) {
	for _, in := range []string{
		`{"job_id":19278}` + "\n",
		`{"job_id":0}`,
		`{"job_id":18446744073709551615}`,
		`{"job_id":18446744073709551616}`, // overflows: an error, as encoding/json says
		`{"job_id":012}`,                  // not JSON
		`{"job_id":-1}`,
		`{"job_id":1.5}`,
		`{"job_id":7,"warnings":["sbatch: --mail-type has no effect yet"]}`,
		`{"job_id":7,"test_start":"2026-11-30T10:00:00Z","test_nodes":"gpu01","test_cpus":4,"test_partition":"gpu"}`,
		` {"job_id": 7} `,
		`{"job_id":}`,
		`{"job_id":7`,
		`null`,
		``,
	} {
		var got, want SubmitResponse
		gotErr := got.DecodeJSON([]byte(in))
		wantErr := json.Unmarshal([]byte(in), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%q: error %v, encoding/json says %v", in, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v, want %+v", in, got, want)
		}
	}
}
