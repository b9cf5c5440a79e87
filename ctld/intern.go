package ctld

import "github.com/tide-hpc/tide/ctld/api"

// interner shares the strings that thousands of jobs repeat (user,
// partition, directories, host, state words), so 10,000 pending jobs
// cost one copy of each instead of 10,000. Called with mu held.
type interner map[string]string

// maxInterned bounds the table; past it the table starts over (only
// sharing is lost, never correctness).
const maxInterned = 1 << 16

func (in *interner) str(s string) string {
	if s == "" {
		return s
	}
	if *in == nil || len(*in) > maxInterned {
		*in = make(interner, 256)
	}
	if c, ok := (*in)[s]; ok {
		return c
	}
	(*in)[s] = s
	return s
}

// job interns j's repeated strings in place.
func (in *interner) job(j *api.Job) {
	for _, p := range []*string{&j.Name, &j.Account, &j.Partition, &j.QOS, &j.WorkDir, &j.SubmitDir,
		&j.SubmitHost, &j.Stdout, &j.Stderr, &j.Stdin, &j.OpenMode, &j.User, &j.Group, &j.Cluster,
		&j.ReasonDetail} {
		*p = in.str(*p)
	}
	j.State = in.state(j.State) // the same word, shared: no transition
	j.Reason = api.ReasonCode(in.str(string(j.Reason)))
	j.HoldKind = api.Hold(in.str(string(j.HoldKind)))
}

// state interns a state word.
func (in *interner) state(s api.JobState) api.JobState { return api.JobState(in.str(string(s))) }
