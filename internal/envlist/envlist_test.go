package envlist

import (
	"slices"
	"testing"
)

func TestList(t *testing.T) {
	l := FromEntries([]string{"A=1", "NOEQUALS", "=x", "B=2", "A=3", "C=a=b"})
	l.Set("D", "4")
	l.Set("B", "5")
	var zero List
	zero.Set("X", "1")
	for _, tt := range []struct {
		name string
		got  []string
		want []string
	}{
		{"first place, last value; malformed dropped", l.Entries(), []string{"A=3", "B=5", "C=a=b", "D=4"}},
		{"zero List", zero.Entries(), []string{"X=1"}},
	} {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if kv, ok := l.Entry("C"); !ok || kv != "C=a=b" {
		t.Errorf("Entry(C) = %q %v", kv, ok)
	}
	if l.Has("NOEQUALS") || !l.Has("D") {
		t.Error("Has is wrong")
	}
	var vals []string
	l.Each(func(k, v, kv string) { vals = append(vals, k+":"+v) })
	if want := []string{"A:3", "B:5", "C:a=b", "D:4"}; !slices.Equal(vals, want) {
		t.Errorf("Each saw %q, want %q", vals, want)
	}
}
