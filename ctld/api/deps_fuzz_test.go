package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseDependency checks that a parsed dependency prints (String,
// what scontrol shows and the controller stores back into the job) as
// text that parses to the same dependency, and that every refusal is
// ErrInvalidArgument.
func FuzzParseDependency(f *testing.F) {
	for _, s := range []string{
		"", "afterok:12", "afterany:12:13", "afterok:1,afternotok:2", "afterok:1?afterany:2", "after:5+10",
		"afterok:7_3", "aftercorr:7,SINGLETON", "afterok:1(failed),afterany:2(fulfilled)",
		"afterok:1,afterok:2?afterok:3", "before:1", "afterok", "afterok:1+5", "afterok:1(maybe)",
		"singleton:4", "afterok:1,", "afterok:0", "afterok:7_*", "after:5+0", "singleton(fulfilled)",
		"afterok:18446744073709551615", "afterok:18446744073709551616", "after:1+9223372036854775807",
		"after:1+-1", "afterok:1_-1", "afterok:1_9223372036854775807", "afterok: 1 ", " afterok:1(unfulfilled)",
		"afterok:1((failed))", "afterok:1(failed", "afterok:\x00", "\xff:1", "AFTEROK:1", "afterok:1::2",
		"afterok:+1", "afterok:1_+2", "?", ",", "afterok:1?", strings.Repeat("afterok:1,", 100) + "afterok:2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDependency(s)
		if err != nil {
			wantInvalid(t, "ParseDependency("+s+")", err)
			return
		}
		if d == nil {
			if strings.TrimSpace(s) != "" {
				t.Fatalf("ParseDependency(%q) = nil without an error", s)
			}
			return
		}
		for _, it := range d.Items {
			if it.Kind != DepSingleton && it.JobID == 0 || it.Task < 0 || it.Minutes < 0 {
				t.Fatalf("ParseDependency(%q) item %+v", s, it)
			}
		}
		shown := d.String()
		back, err := ParseDependency(shown)
		if err != nil {
			t.Fatalf("ParseDependency(%q) shown as %q, which does not parse: %v", s, shown, err)
		}
		if diff := cmp.Diff(d, back); diff != "" {
			t.Fatalf("ParseDependency(%q) shown as %q reads back otherwise (-first +back):\n%s", s, shown, diff)
		}
		_ = d.State()
	})
}
