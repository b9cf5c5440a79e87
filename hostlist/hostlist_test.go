package hostlist

import (
	"math/rand"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []string
		wantErr    string
	}{
		{name: "plain", expr: "n1", want: []string{"n1"}},
		{name: "list", expr: "n1,n2", want: []string{"n1", "n2"}},
		{name: "range keeps padding", expr: "gpu[001-003,020]", want: []string{"gpu001", "gpu002", "gpu003", "gpu020"}},
		{name: "two groups", expr: "r[1-2]-n[1-2]", want: []string{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}},
		{name: "mixed", expr: "a,gpu[01-02],b", want: []string{"a", "gpu01", "gpu02", "b"}},
		{name: "empty", expr: "", want: nil},
		{name: "unbalanced", expr: "n[1-2", wantErr: "missing ']'"},
		{name: "backwards", expr: "n[3-1]", wantErr: "backwards"},
		{name: "letters", expr: "n[a-b]", wantErr: "bad range"},
		{name: "empty host", expr: "n1,,n2", wantErr: "empty host"},
		{name: "too many", expr: "n[0-99999999]", wantErr: "too large"},
		{name: "too many digits", expr: "n[0-99999999999]", wantErr: "at most 9 digits"},
		{name: "many ranges", expr: "n[0-999999,0-999999]", wantErr: "more than 1048576 hosts"},
		{name: "long names", expr: strings.Repeat("x", 100) + "[0-999999]", wantErr: "longer than 67108864 bytes"},
		{name: "space in a name", expr: "a b[1-2]", wantErr: "bad host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.expr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Expand(%q) err = %v, want %q", tt.expr, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Expand(%q) = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestCompress(t *testing.T) {
	tests := []struct {
		hosts []string
		want  string
	}{
		{[]string{"n1"}, "n1"},
		{[]string{"n2", "n1"}, "n[1-2]"},
		{[]string{"gpu01", "gpu02", "gpu04", "gpu05", "gpu06"}, "gpu[01-02,04-06]"},
		{[]string{"login", "gpu01", "gpu03"}, "gpu[01,03],login"},
		{[]string{"n1", "n1"}, "n1"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := Compress(tt.hosts); got != tt.want {
			t.Errorf("Compress(%v) = %q, want %q", tt.hosts, got, tt.want)
		}
	}
}

// TestRoundTrip checks that Expand(Compress(x)) gives back the set x for
// random host sets.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	prefixes := []string{"gpu", "n", "rack1-n", "cpu"}
	for i := 0; i < 500; i++ {
		set := map[string]bool{}
		for k := rng.Intn(40); k >= 0; k-- {
			p := prefixes[rng.Intn(len(prefixes))]
			set[p+pad(rng.Intn(120), 1+rng.Intn(3))] = true
		}
		var hosts []string
		for h := range set {
			hosts = append(hosts, h)
		}
		expr := Compress(hosts)
		back, err := Expand(expr)
		if err != nil {
			t.Fatalf("Expand(Compress(%v)) = %q: %v", hosts, expr, err)
		}
		if len(back) != len(set) {
			t.Fatalf("round trip of %v via %q gave %v", hosts, expr, back)
		}
		for _, h := range back {
			if !set[h] {
				t.Fatalf("round trip of %v via %q invented %q", hosts, expr, h)
			}
		}
	}
}

func pad(n, width int) string {
	s := strings.Repeat("0", width) + itoa(n)
	if len(itoa(n)) >= width {
		return itoa(n)
	}
	return s[len(s)-width:]
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestExpandBoundedWork pins that Expand sizes an expansion before it
// builds it: refusing one costs little memory, where ranges that each
// fit (n[0-999999,0-999999,…]) or a long prefix before a large range
// were listed in full first.
func TestExpandBoundedWork(t *testing.T) {
	for _, expr := range []string{
		"n[0-999999,0-999999,0-999999,0-999999]",
		strings.Repeat("x", 1000) + "[0-999999]",
		"a[0-999999]b[0-999999]",
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Expand(expr)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("Expand(%.40q…) succeeded", expr)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("Expand(%.40q…) allocated %d bytes before refusing it", expr, n)
		}
	}
}
