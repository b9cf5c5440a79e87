// Package events implements two Tide-only commands that explain what
// happened: `tide events JOBID` prints a job's trail (every state change
// and scheduling decision with its reason and actor) and `tide audit`
// prints the newest audit records (who did what to which object). Both
// print a borderless table, or JSON with --json for programs.
package events
