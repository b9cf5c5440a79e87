package opts

import (
	"errors"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// FuzzExportEnv checks --export against a caller environment: every
// entry of the result is NAME=value with a valid name, each name once;
// refusals are ErrInvalidArgument.
func FuzzExportEnv(f *testing.F) {
	for _, s := range []string{
		"", "ALL", "NONE", "HOME", "A=1,B", "A=\"a,b\",B='c,d'", "ALL,A=1", "NONE,A", "\"", "'a", ",", " , ",
		"1A=x", "A-B=x", "A==", "A=", "=x", "HOME,HOME=/x,HOME", "A=\"x", "A=\x00", "\xff=1", "SLURM_X=1",
	} {
		f.Add(s, "HOME=/home/alice\nSLURM_CONF=/etc/slurm.conf\nEMPTY=")
	}
	f.Add("ALL", "A\nB=1\n=x\nB=2\nSLURM_=y")
	f.Fuzz(func(t *testing.T, spec, environ string) {
		env, err := exportEnv(spec, strings.Split(environ, "\n"))
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("exportEnv(%q): %v is not ErrInvalidArgument", spec, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range env {
			k, _, ok := strings.Cut(e, "=")
			if !ok || seen[k] {
				t.Fatalf("exportEnv(%q, %q): entry %q (names so far %v)", spec, environ, e, seen)
			}
			seen[k] = true
		}
	})
}
