package api

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// arraySeeds are TestParseArraySpec's inputs plus hostile ones: steps
// near MaxInt (i+step wrapped negative and listed negative task ids),
// lists whose parts each fit but whose sum does not, huge throttles.
var arraySeeds = []string{
	"0-9", "1,3,5-9", "0-99:4", "0-8:4", "10-99%8", "7", "5-9,1-6,3", "0-10000", "0-10001", "9-1",
	"-1-3", "5:2", "0-9:0", "", "1,,2", "0-9%x", "a-b", "3-4:9223372036854775806", "0-1:9223372036854775807",
	"0-9999,0-9999,0-9999", "0-9%9223372036854775807", "0-9%-1", "0-9%", "%4", "+1-+3", "0-9:+2",
	"1-3:1:1", "1-2-3", "0-9223372036854775807", "9223372036854775807", "0-9\x00", "\xff", " 0-3 ",
	"1,1,1,1", "0-20:2,1-21:2", "0-9%0",
}

// FuzzParseArraySpec checks that a parsed --array holds only task ids
// from 0 below the max size, that its String and its TaskSet's String
// (squeue's %K) parse back to the same set, that the set is canonical,
// and that every refusal is ErrInvalidArgument.
func FuzzParseArraySpec(f *testing.F) {
	for _, s := range arraySeeds {
		f.Add(s, uint16(10001))
	}
	f.Add("0-65534", uint16(65535))
	f.Add("0-3", uint16(0))
	f.Fuzz(func(t *testing.T, s string, max uint16) {
		// A max size of 0 means MaxArrayTaskLimit: four million ids to
		// list and sort for "0-3999999", too slow for fuzzing.
		maxSize := int(max)
		if maxSize == 0 {
			maxSize = 1
		}
		spec, err := ParseArraySpec(s, maxSize)
		if err != nil {
			wantInvalid(t, "ParseArraySpec("+s+")", err)
			return
		}
		ids := spec.Tasks.Ids()
		if len(ids) == 0 || len(ids) > maxSize || spec.Tasks.Len() != len(ids) || spec.Throttle < 0 {
			t.Fatalf("ParseArraySpec(%q, %d) = %d ids (Len %d), throttle %d", s, maxSize, len(ids), spec.Tasks.Len(), spec.Throttle)
		}
		if ids[0] < 0 || ids[len(ids)-1] >= maxSize || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatalf("ParseArraySpec(%q, %d) ids %v", s, maxSize, ids)
		}
		if spec.Tasks.Min() != ids[0] || spec.Tasks.Max() != ids[len(ids)-1] {
			t.Fatalf("ParseArraySpec(%q): Min/Max %d/%d of %v", s, spec.Tasks.Min(), spec.Tasks.Max(), ids)
		}
		if diff := cmp.Diff(NewTaskSet(ids), spec.Tasks); diff != "" {
			t.Fatalf("ParseArraySpec(%q) is not canonical (-canonical +got):\n%s", s, diff)
		}
		for _, text := range []string{spec.String(), spec.Tasks.String()} {
			back, err := ParseArraySpec(text, maxSize)
			if err != nil {
				t.Fatalf("ParseArraySpec(%q) printed as %q, which does not parse: %v", s, text, err)
			}
			if diff := cmp.Diff(spec.Tasks, back.Tasks); diff != "" {
				t.Fatalf("ParseArraySpec(%q) printed as %q reads back otherwise (-first +back):\n%s", s, text, diff)
			}
		}
		if back, _ := ParseArraySpec(spec.String(), maxSize); back.Throttle != spec.Throttle {
			t.Fatalf("ParseArraySpec(%q): throttle %d printed as %q reads back as %d", s, spec.Throttle, spec.String(), back.Throttle)
		}
		if len(ids) <= 64 {
			for _, i := range ids {
				rest := spec.Tasks.Remove(i)
				if !spec.Tasks.Contains(i) || rest.Contains(i) || rest.Len() != len(ids)-1 {
					t.Fatalf("ParseArraySpec(%q): Contains/Remove(%d) of %v gives %v", s, i, spec.Tasks, rest)
				}
			}
		}
	})
}

// FuzzParseJobIDs checks the job id words of scancel, squeue -j and
// scontrol: one job or some tasks, never both, and every task reads
// back as itself.
func FuzzParseJobIDs(f *testing.F) {
	for _, s := range []string{
		"12", "12_*", "12_7", "12_[1-3,5]", "12_[1-3%2]", "12_x", "0", "abc", "12_[", "12_]", "12_[]",
		"18446744073709551615", "18446744073709551616_1", "12_-1", "12_[3-4:9223372036854775806]",
		"12_[0-9999]", "_1", "12_", "12__1", "12_[1]_[2]", "12_1\x00", " 12_3 ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, tasks, err := ParseJobIDs(s)
		if err != nil {
			wantInvalid(t, "ParseJobIDs("+s+")", err)
			return
		}
		if (len(ids) == 0) == (len(tasks) == 0) || len(ids) > 1 {
			t.Fatalf("ParseJobIDs(%q) = %v, %v", s, ids, tasks)
		}
		for _, id := range ids {
			if id == 0 {
				t.Fatalf("ParseJobIDs(%q) = job 0", s)
			}
		}
		for i, tr := range tasks {
			if tr.JobID == 0 || tr.Task < 0 || tr.Task >= MaxArrayTaskLimit {
				t.Fatalf("ParseJobIDs(%q) task %+v", s, tr)
			}
			if i > 16 {
				continue
			}
			_, back, err := ParseJobIDs(tr.String())
			if err != nil || len(back) != 1 || back[0] != tr {
				t.Fatalf("ParseJobIDs(%q) task %+v printed as %q reads back as %v, %v", s, tr, tr.String(), back, err)
			}
		}
	})
}
