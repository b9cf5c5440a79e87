package stepd

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/noded/cgroup"
)

// checkPlan fails t unless decodePlan and json.Unmarshal agree on data:
// the same plan, or both an error.
func checkPlan(t *testing.T, name string, data []byte) {
	t.Helper()
	var want, got Plan
	wantErr := json.Unmarshal(data, &want)
	err := decodePlan(data, &got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, json.Unmarshal error %v\ninput: %q", name, err, wantErr, data)
	}
	if err != nil {
		if err.Error() != wantErr.Error() {
			t.Fatalf("%s: error %q, json.Unmarshal %q", name, err, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded\n%+v\njson.Unmarshal\n%+v\ninput: %q", name, got, want, data)
	}
}

// planPieces make strings with what encoding/json escapes, what it
// passes through and invalid UTF-8.
var planPieces = []string{
	"a", "/home/alice/run dir", "PATH=/usr/bin:/bin", "2>&1", "<", `"`, `\`, "\n", "\t", "\x01",
	"é", "日本", "😀", "\u2028", "\x7f", "\xff", "\xed\xa0\x80", "BASH_FUNC_module%%=() {  eval $($LMOD_CMD bash \"$@\")\n}",
}

func planString(rng *rand.Rand) string {
	var sb strings.Builder
	for range rng.IntN(4) {
		sb.WriteString(planPieces[rng.IntN(len(planPieces))])
	}
	return sb.String()
}

func planStrings(rng *rand.Rand) []string {
	if rng.IntN(4) == 0 {
		return nil
	}
	out := make([]string, rng.IntN(6))
	for i := range out {
		out[i] = planString(rng)
	}
	return out
}

// randomPlan is a plan as tided might write it, any field possibly zero.
func randomPlan(rng *rand.Rand) Plan {
	u32 := func() uint32 { return []uint32{0, 1, 1000, math.MaxUint32, rng.Uint32()}[rng.IntN(5)] }
	p := Plan{
		JobID: []uint64{0, 1, 42, math.MaxUint64, rng.Uint64()}[rng.IntN(5)],
		Node:  planString(rng), Script: planString(rng), Args: planStrings(rng), Env: planStrings(rng),
		WorkDir: planString(rng), Stdin: planString(rng), Stdout: planString(rng), Stderr: planString(rng),
		Append: rng.IntN(2) == 0, Umask: []int{-1, 0, 0o22, 0o77}[rng.IntN(4)], SetUser: rng.IntN(2) == 0,
		UID: u32(), GID: u32(),
	}
	if rng.IntN(2) == 0 {
		p.Groups = []uint32{u32(), u32()}[:rng.IntN(3)]
	}
	if rng.IntN(2) == 0 {
		p.Cgroup = &CgroupPlan{Required: rng.IntN(2) == 0, Parent: "tide", Name: planString(rng),
			Limits: cgroup.Limits{CPUs: rng.IntN(64), MemoryBytes: rng.Int64(), Cpuset: planString(rng)}}
	}
	return p
}

func TestDecodePlanMatchesEncodingJSON(t *testing.T) {
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 11))
		p := randomPlan(rng)
		data, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, fmt.Sprintf("seed %d", seed), data)
	}
}

var planEdgeCases = []string{
	``, `null`, `{}`, ` {"job_id":1} `, `{"job_id":1}x`, `{"job_id":1}{}`, `{"job_id":-1}`, `{"job_id":1.5}`,
	`{"job_id":18446744073709551616}`, `{"JOB_ID":7}`, `{"unknown":[1,{"a":"}"}],"job_id":3}`, `{"env":null}`,
	`{"env":[]}`, `{"env":["a","b"],"env":["c"]}`, `{"env":["a\u0000b","\ud83d\ude00","\ud800x"]}`, `{"env":["\q"]}`,
	`{"groups":[]}`, `{"groups":[1,-2]}`, `{"groups":[4294967296]}`, `{"umask":-1}`, `{"umask":"0"}`,
	`{"cgroup":null}`, `{"cgroup":{"parent":"tide","name":"job_1","limits":{"cpus":2,"devices":{"allow":[]}}}}`,
	`{"cgroup":{"parent":"tide"},"cgroup":{"name":"x"}}`, `{"cgroup":{"unknown":1}}`, `{"set_user":true,"uid":0}`,
	"{\"node\":\"\xff\"}", `{"node":"a"`, `{"node":"a",}`,
}

func TestDecodePlanEdgeCases(t *testing.T) {
	for i, in := range planEdgeCases {
		checkPlan(t, fmt.Sprintf("case %d", i), []byte(in))
	}
}

func FuzzDecodePlan(f *testing.F) {
	for _, in := range planEdgeCases {
		f.Add([]byte(in))
	}
	p := randomPlan(rand.New(rand.NewPCG(1, 2)))
	if data, err := json.Marshal(&p); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPlan(t, "fuzz", data)
	})
}
