package api

import "path"

// StdPaths expands the job's output patterns as Slurm shows them
// (scontrol show job, sacct's StdOut, the dashboard): relative to
// WorkDir, with %N the batch host or left as written while the job has
// no nodes; stderr defaults to stdout and stdin to /dev/null.
func (j *Job) StdPaths() (stdout, stderr, stdin string) {
	vars := j.PatternVars("%N")
	if h := j.BatchHost(); h != "" {
		vars.Node = h
	}
	abs := func(p string) string {
		p = ExpandPattern(p, vars)
		if !path.IsAbs(p) && j.WorkDir != "" {
			p = path.Join(j.WorkDir, p)
		}
		return p
	}
	out := j.Stdout
	if out == "" {
		out = DefaultStdout // arrays get theirs at submission
	}
	stdout = abs(out)
	stderr = stdout
	if j.Stderr != "" {
		stderr = abs(j.Stderr)
	}
	stdin = "/dev/null"
	if j.Stdin != "" {
		stdin = abs(j.Stdin)
	}
	return stdout, stderr, stdin
}
