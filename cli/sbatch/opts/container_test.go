package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestContainerOptions(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		directives []string
		env        map[string]string
		image      string
		mounts     []api.ContainerMount
		wantErr    bool
	}{
		{name: "short name is normalised", args: []string{"--container-image=tide-test/bb"}, image: "docker.io/tide-test/bb:latest"},
		{name: "official image", args: []string{"--container-image", "ubuntu:22.04"}, image: "docker.io/library/ubuntu:22.04"},
		{name: "registry with port", args: []string{"--container-image=reg.local:5000/ml/pt:1"}, image: "reg.local:5000/ml/pt:1"},
		{name: "pyxis registry#image", args: []string{"--container-image=nvcr.io#nvidia/pytorch:24.01-py3"}, image: "nvcr.io/nvidia/pytorch:24.01-py3"},
		{name: "directive", directives: []string{"#SBATCH --container-image=tide-test/bb", "#SBATCH --container-mounts=/data:/data:ro"},
			image: "docker.io/tide-test/bb:latest", mounts: []api.ContainerMount{{Source: "/data", Destination: "/data", ReadOnly: true}}},
		{name: "command line beats directive", args: []string{"--container-image=alpine"}, directives: []string{"#SBATCH --container-image=tide-test/bb"},
			image: "docker.io/library/alpine:latest"},
		{name: "environment", env: map[string]string{"SBATCH_CONTAINER_IMAGE": "tide-test/bb"}, image: "docker.io/tide-test/bb:latest"},
		{name: "mounts", args: []string{"--container-image=bb", "--container-mounts=/scratch,/home/alice/ds:/ds:ro,/opt/x:/x:rw"}, image: "docker.io/library/bb:latest",
			mounts: []api.ContainerMount{{Source: "/scratch", Destination: "/scratch"}, {Source: "/home/alice/ds", Destination: "/ds", ReadOnly: true}, {Source: "/opt/x", Destination: "/x"}}},
		{name: "upper case image is refused", args: []string{"--container-image=Tide/BB"}, wantErr: true},
		{name: "relative mount is refused", args: []string{"--container-mounts=data:/data"}, wantErr: true},
		{name: "bad mount flag", args: []string{"--container-mounts=/a:/b:rx"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput(append(tt.args, "job.sh"), tt.directives, tt.env, nil)
			req, err := Parse(in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if req.Spec.ContainerImage != tt.image {
				t.Errorf("image %q, want %q", req.Spec.ContainerImage, tt.image)
			}
			if diff := cmp.Diff(tt.mounts, req.Spec.ContainerMounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}
