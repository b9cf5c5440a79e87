package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeImage(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "user image", in: "tide-test/bb", want: "docker.io/tide-test/bb:latest"},
		{name: "official", in: "ubuntu", want: "docker.io/library/ubuntu:latest"},
		{name: "already full", in: "docker.io/tide-test/bb:latest", want: "docker.io/tide-test/bb:latest"},
		{name: "other registry keeps its tag", in: "ghcr.io/a/b:v1", want: "ghcr.io/a/b:v1"},
		{name: "digest", in: "ghcr.io/a/b@sha256:" + sixtyFour, want: "ghcr.io/a/b@sha256:" + sixtyFour},
		{name: "enroot registry#image", in: "nvcr.io#nvidia/pytorch:24.01-py3", want: "nvcr.io/nvidia/pytorch:24.01-py3"},
		{name: "spaces trimmed", in: " alpine ", want: "docker.io/library/alpine:latest"},
		{name: "empty", in: "", wantErr: true},
		{name: "upper case", in: "Ubuntu", wantErr: true},
		{name: "docker hub spelled out", in: "index.docker.io/ubuntu:22.04", want: "docker.io/library/ubuntu:22.04"},
		{name: "registry with port", in: "localhost:5000/team/img", want: "localhost:5000/team/img:latest"},
		{name: "tag and digest keep the digest", in: "a/b:v1@sha256:" + sixtyFour, want: "docker.io/a/b@sha256:" + sixtyFour},
		{name: "separators", in: "my_org/my-img.v2__x", want: "docker.io/my_org/my-img.v2__x:latest"},
		{name: "bad digest", in: "a/b@sha256:1234", wantErr: true},
		{name: "bad tag", in: "a/b:-x", wantErr: true},
		{name: "bad component", in: "a/-b", wantErr: true},
		{name: "double slash", in: "a//b", wantErr: true},
		{name: "bad port", in: "host:x/img", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeImage(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseContainerMounts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []ContainerMount
		wantErr bool
	}{
		{name: "source only", in: "/data", want: []ContainerMount{{Source: "/data", Destination: "/data"}}},
		{name: "ro and rw", in: "/a:/b:ro, /c:/d:rw", want: []ContainerMount{{"/a", "/b", true}, {"/c", "/d", false}}},
		{name: "paths cleaned", in: "/a//x/:/b/./y", want: []ContainerMount{{Source: "/a/x", Destination: "/b/y"}}},
		{name: "empty items skipped", in: ",/a,", want: []ContainerMount{{Source: "/a", Destination: "/a"}}},
		{name: "relative source", in: "a:/b", wantErr: true},
		{name: "relative destination", in: "/a:b", wantErr: true},
		{name: "unknown flag", in: "/a:/b:rbind", wantErr: true},
		{name: "too many fields", in: "/a:/b:ro:x", wantErr: true},
		{name: "over the root", in: "/a:/", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseContainerMounts(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	if s := (ContainerMount{"/a", "/b", true}).String(); s != "/a:/b:ro" {
		t.Fatalf("String = %q", s)
	}
}
