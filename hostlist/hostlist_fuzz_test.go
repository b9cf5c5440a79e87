package hostlist

import (
	"slices"
	"strings"
	"testing"
)

// expandSeeds are TestExpand's expressions plus hostile ones: ranges and
// prefixes that multiply into more than MaxHosts names or MaxBytes of
// them, long numbers, many groups, NUL bytes and invalid UTF-8.
var expandSeeds = []string{
	"n1", "n1,n2", "gpu[001-003,020]", "r[1-2]-n[1-2]", "a,gpu[01-02],b", "", "n[1-2",
	"n[3-1]", "n[a-b]", "n1,,n2", "n[0-99999999]", "n[0-99999999999]", "n[0-999999]",
	"n[0-999999,0-999999,0-999999,0-999999,0-999999]", strings.Repeat("x", 1000) + "[0-999999]",
	strings.Repeat("a[1]", 2000), strings.Repeat("a[0-1]", 21), "n[[1]]", "n]1[", "n[1]]",
	"n[]", "n[1-2,]", "n[-1]", "n[1--2]", " n[1-2] , m ", "a b", "a b[1-2]", "n[1]\x00",
	"\xff[1-2]", "n[01-9]", "n[9-10]", "[1-3]", "n[1-3]x[", "n[000000000-000000001]",
	"n[1,1,1]", "rack[1-2]-n[01-04]-gpu[0-7]",
}

// FuzzExpand checks that Expand never panics, refuses what would pass
// MaxHosts or MaxBytes, builds as many names as it sized and names a
// hostlist can hold, and that compressing its result and expanding
// again gives the same set. Expressions of more than bigExpansion hosts
// are only sized, not built, so that the fuzzer keeps its pace.
func FuzzExpand(f *testing.F) {
	for _, s := range expandSeeds {
		f.Add(s)
	}
	const bigExpansion = 20000
	f.Fuzz(func(t *testing.T, expr string) {
		n, size, perr := sizeOf(expr)
		if perr == nil && n > bigExpansion && n <= MaxHosts && size <= MaxBytes {
			return
		}
		hosts, err := Expand(expr)
		switch {
		case (perr != nil || n > MaxHosts || size > MaxBytes) && err == nil:
			t.Fatalf("Expand(%q) = %d hosts, want an error (%d hosts, %d bytes, %v)", expr, len(hosts), n, size, perr)
		case perr == nil && n <= MaxHosts && size <= MaxBytes && err != nil:
			t.Fatalf("Expand(%q): %v, want %d hosts", expr, err, n)
		case err != nil:
			if hosts != nil {
				t.Fatalf("Expand(%q) = %d hosts and error %v", expr, len(hosts), err)
			}
			return
		}
		if strings.TrimSpace(expr) != "" && len(hosts) != n {
			t.Fatalf("Expand(%q) = %d hosts, sized as %d", expr, len(hosts), n)
		}
		total := 0
		for _, h := range hosts {
			total += len(h)
			if h == "" || strings.ContainsAny(h, "[], \t") {
				t.Fatalf("Expand(%q) built host name %q", expr, h)
			}
		}
		if total > size {
			t.Fatalf("Expand(%q): %d bytes of names, sized as at most %d", expr, total, size)
		}
		checkRoundTrip(t, hosts)
	})
}

// sizeOf sizes an expansion as Expand does, without building it.
func sizeOf(expr string) (hosts, size int, err error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return 0, 0, nil
	}
	parts, err := splitTop(expr)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range parts {
		w, err := parseWord(p)
		if err != nil {
			return 0, 0, err
		}
		n, b := w.size()
		hosts, size = min(hosts+n, MaxHosts+1), min(size+b, MaxBytes+1)
	}
	return hosts, size, nil
}

// FuzzCompress checks Expand(Compress(hosts)) == set(hosts) for host
// names split from the input at '/' (names a hostlist cannot hold are
// dropped).
func FuzzCompress(f *testing.F) {
	for _, s := range []string{
		"n1", "n2/n1", "gpu01/gpu02/gpu04/gpu05/gpu06", "login/gpu01/gpu03", "n1/n1", "",
		"n01/n1/n001", "n9/n10/n11", "rack1-n1/rack1-n2/rack2-n1", "1/2/3", "n0/n00",
		"n1234567890/n1234567891", "a1b/a2b/a1c", "n-1/n-2", "x\xff1/x\xff2", "n\x001/n\x002",
		"n999999999/n1000000000", "n000000009/n000000010",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		var hosts []string
		for _, h := range strings.Split(list, "/") {
			if h != "" && !strings.ContainsAny(h, "[], \t\n\v\f\r") && h == strings.TrimSpace(h) {
				hosts = append(hosts, h)
			}
		}
		checkRoundTrip(t, hosts)
	})
}

// checkRoundTrip fails unless Compress(hosts) expands to hosts as a set.
func checkRoundTrip(t *testing.T, hosts []string) {
	t.Helper()
	expr := Compress(hosts)
	back, err := Expand(expr)
	if err != nil {
		t.Fatalf("Expand(Compress(%q)) = Expand(%q): %v", hosts, expr, err)
	}
	want := slices.Clone(hosts)
	slices.Sort(want)
	want = slices.Compact(want)
	got := slices.Clone(back)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Expand(Compress(%q)) = Expand(%q) = %q", hosts, expr, back)
	}
}
