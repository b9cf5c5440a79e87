package api

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseContainerMounts checks that every mount parsed has absolute,
// clean paths and never the root as destination, and that the mounts
// joined in their String spelling parse back to the same list. A path
// that ends in white space is the exception: the parse trims the ends
// of each comma item, so "/a/.. /" (source and destination "/a/.. ")
// prints as "/a/.. :/a/.. ", whose destination reads as "/a/..", the
// root (testdata/fuzz/FuzzParseContainerMounts).
func FuzzParseContainerMounts(f *testing.F) {
	for _, s := range []string{
		"/a:/b", "/a:/b:ro", "/a", "/a::rw", "/a:/b:ro,/c:/d", "a:/b", "/a:b", "/a:/", "/a:/b:x", "/a:/b:ro:x",
		"", ",", " /a : /b ", "/a/../..:/b/./c/", "/a\x00:/b", "/\xff:/b", "//a:/b", "/a:/b:RO",
		strings.Repeat("/a:/b,", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseContainerMounts(s)
		if err != nil {
			wantInvalid(t, "ParseContainerMounts("+s+")", err)
			return
		}
		parts := make([]string, len(ms))
		edge := false
		for i, m := range ms {
			edge = edge || strings.TrimSpace(m.Source) != m.Source || strings.TrimSpace(m.Destination) != m.Destination
			if !path.IsAbs(m.Source) || !path.IsAbs(m.Destination) || path.Clean(m.Source) != m.Source ||
				path.Clean(m.Destination) != m.Destination || m.Destination == "/" {
				t.Fatalf("ParseContainerMounts(%q) mount %+v", s, m)
			}
			parts[i] = m.String()
		}
		if edge {
			return
		}
		back, err := ParseContainerMounts(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("ParseContainerMounts(%q) written as %q does not parse: %v", s, strings.Join(parts, ","), err)
		}
		if diff := cmp.Diff(ms, back); diff != "" {
			t.Fatalf("ParseContainerMounts(%q) reads back otherwise (-first +back):\n%s", s, diff)
		}
	})
}

// FuzzNormalizeImage checks that a normalised image reference is
// normalised already (the same image under two spellings must meet on
// one), names a registry and a tag or digest, and that every refusal is
// ErrInvalidArgument.
func FuzzNormalizeImage(f *testing.F) {
	for _, s := range []string{
		"ubuntu", "tide-test/bb", "docker.io/library/ubuntu:latest", "index.docker.io/ubuntu", "localhost/x:1",
		"registry.example.com:5000/a/b:v1.2", "nvcr.io#nvidia/pytorch:24.01-py3", "Ubuntu", "ubuntu:",
		"ubuntu@sha256:" + strings.Repeat("a", 64), "ubuntu:1@sha256:" + strings.Repeat("0", 64), "ubuntu@md5:00",
		"a//b", "a__b", "a___b", "a--b", "-a", "a.", "", " ", "#", "a#", "#b", "localhost:99999999999999999999/x",
		"[::1]:5000/x", "a:b:c", "a/b:" + strings.Repeat("t", 200), "\x00", "\xff", "a\x00b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		img, err := NormalizeImage(s)
		if err != nil {
			wantInvalid(t, "NormalizeImage("+s+")", err)
			return
		}
		again, err := NormalizeImage(img)
		if err != nil || again != img {
			t.Fatalf("NormalizeImage(%q) = %q, which normalises to %q, %v", s, img, again, err)
		}
		name, _, _ := strings.Cut(img, "@")
		if !strings.Contains(img, "/") || !strings.Contains(img, "@") && strings.LastIndexByte(name, ':') < strings.LastIndexByte(name, '/') {
			t.Fatalf("NormalizeImage(%q) = %q, without a registry or tag", s, img)
		}
	})
}
