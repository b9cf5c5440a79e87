package gres

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzNormalizeBusID checks that a normalised PCI address is normalised
// already: NVML's, lspci's and sysfs's spellings of one GPU must meet.
func FuzzNormalizeBusID(f *testing.F) {
	for _, s := range []string{
		"00000000:1B:00.0", "1b:00.0", "0000:1b:00.0", "ffffffff:ff:1f.7", "100000000:00:00.0", "0:0:0.8", "1b:20.0",
		"1b:00", ":00.0", "1b:.0", "g:00.0", "1b:00.0:0", " 1b:00.0 ", "+1:1:1.1", "\x00", "\xff:00.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := NormalizeBusID(s)
		if err != nil {
			return
		}
		again, err := NormalizeBusID(id)
		if err != nil || again != id {
			t.Fatalf("NormalizeBusID(%q) = %q, which normalises to %q, %v", s, id, again, err)
		}
	})
}

// FuzzParseLinks checks a static GPU's Links= list (tided.yaml): what
// parses writes back with FormatLinks as a list that parses to the same
// links.
func FuzzParseLinks(f *testing.F) {
	for _, s := range []string{"-1,18,18,0", "18,-1,PIX,sys", "-1", "-1,-1", "-1,-2", "-1,x", "0,-1", "-1, 4 ,NODE,phb",
		"-1,99999999999999999999", "-1,+3", "-1,\x00", ""} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, self uint8) {
		entries := splitLinks(s)
		n := len(entries)
		if n > 64 {
			return
		}
		links, err := parseLinks(entries, int(self)%max(n, 1), n)
		if err != nil {
			return
		}
		d := Device{Index: int(self) % n, Links: links}
		text := FormatLinks(d, n)
		back, err := parseLinks(splitLinks(text), d.Index, n)
		if err != nil {
			t.Fatalf("parseLinks(%q) written as %q does not parse: %v", s, text, err)
		}
		if diff := cmp.Diff(links, back); diff != "" {
			t.Fatalf("parseLinks(%q) written as %q reads back otherwise (-first +back):\n%s", s, text, diff)
		}
	})
}
