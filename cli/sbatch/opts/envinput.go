package opts

import (
	"fmt"
	"strconv"
	"strings"
)

// This file reads the input environment variables: sbatch's SBATCH_*
// (the table's env names) and, for srun and salloc, which parse with the
// same table, their own lists (Input.EnvVars).

// EnvVar binds an input environment variable to the option it sets,
// named by its long name in sbatch's table ("partition").
type EnvVar struct {
	Name   string
	Option string
}

// EnvSwitchWait is the Option of SBATCH_WAIT4SWITCH (srun's
// SLURM_WAIT4SWITCH, salloc's SALLOC_WAIT4SWITCH): the wait part of
// --switches alone.
const EnvSwitchWait = "switch-wait"

// SbatchEnvVars lists the variables sbatch reads, in the order they are
// applied (a later one wins over an earlier one for the same option), as
// Slurm 22.05's sbatch lists them: the table's names, then
// SBATCH_WAIT4SWITCH.
func SbatchEnvVars() []EnvVar {
	var out []EnvVar
	for i := range options {
		for _, k := range options[i].env {
			out = append(out, EnvVar{Name: k, Option: options[i].Long})
		}
	}
	return append(out, EnvVar{Name: "SBATCH_WAIT4SWITCH", Option: EnvSwitchWait})
}

// LookupIn returns a LookupEnv over an environment list ("K=V"
// entries, the last of a name winning).
func LookupIn(environ []string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(environ[i], k+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}

// lookupFunc returns how Parse reads a variable: Input.LookupEnv, else
// Getenv (where an empty value reads as unset).
func (in *Input) lookupFunc() func(string) (string, bool) {
	if in.LookupEnv != nil {
		return in.LookupEnv
	}
	return func(k string) (string, bool) {
		v := in.Getenv(k)
		return v, v != ""
	}
}

// applyEnv applies the input variables as the environment layer, with
// Slurm's rules (slurm_process_option with set_by_env):
//
//   - an option without argument (--requeue) is set by an empty value,
//     "yes" or a non-zero number; any other value ("0", "no") unsets it,
//     undoing a #SBATCH directive;
//   - an option with an optional argument (--exclusive) takes an empty
//     value as "no argument";
//   - an option with a required argument ignores an empty value (Tide;
//     Slurm passes it on and most options then fail).
//
// A bad value is an error naming the variable.
func (st *state) applyEnv() error {
	lookup := st.in.lookupFunc()
	vars := st.in.EnvVars
	if vars == nil {
		// sbatch: straight from the table, in table order.
		for i := range options {
			for _, k := range options[i].env {
				if v, ok := lookup(k); ok {
					if err := st.applyEnvValue(i, k, v); err != nil {
						return err
					}
				}
			}
		}
		vars = []EnvVar{{Name: "SBATCH_WAIT4SWITCH", Option: EnvSwitchWait}}
	}
	for _, ev := range vars {
		v, ok := lookup(ev.Name)
		if !ok {
			continue
		}
		if ev.Option == EnvSwitchWait {
			if err := st.setSwitchWait(ev.Name, v); err != nil {
				return err
			}
			continue
		}
		i := optionIndex(ev.Option)
		if i < 0 {
			return fmt.Errorf("opts: environment variable %s names unknown option --%s", ev.Name, ev.Option)
		}
		if err := st.applyEnvValue(i, ev.Name, v); err != nil {
			return err
		}
	}
	return nil
}

// applyEnvValue applies variable k's value v to option i.
func (st *state) applyEnvValue(i int, k, v string) error {
	o := &options[i]
	var err error
	switch o.Arg {
	case NoArg:
		if !envFlagOn(v) {
			st.resetOption(i)
			return nil
		}
		err = st.apply(i, "", false)
	case OptionalArg:
		err = st.apply(i, v, v != "")
	default:
		if v == "" {
			return nil
		}
		err = st.apply(i, v, true)
	}
	if err != nil {
		return fail(fmt.Sprintf("%s (from %s=%s)", err, k, v))
	}
	return nil
}

// envFlagOn is Slurm's reading of a flag variable: set by an empty
// value, "yes" (any case) or a non-zero number.
func envFlagOn(v string) bool {
	if v == "" || strings.EqualFold(v, "yes") {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n != 0
}

// resetOption undoes option i as Slurm's reset does for a flag variable
// that reads as off: the directive's setting goes, the default returns.
func (st *state) resetOption(i int) {
	o := &options[i]
	switch o.Long {
	case "requeue", "no-requeue":
		st.spec.Requeue = nil
	case "wait":
		st.req.Wait = false
	case "verbose":
		st.req.Verbose = 0
	case "hold":
		st.spec.Hold = false
	case "overcommit":
		st.spec.Overcommit = false
	case "parsable":
		st.req.Parsable = false
	case "test-only":
		st.req.TestOnly = false
	case "quiet":
		st.req.Quiet = false
	}
	delete(st.defined, o.id())
	delete(st.fromEnv, o.id())
}

// setSwitchWait is SBATCH_WAIT4SWITCH: how long to wait for the
// --switches count (a time as --time takes it).
func (st *state) setSwitchWait(k, v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	secs, err := parseTime("switches", v)
	if err != nil || secs <= 0 {
		return fail(fmt.Sprintf("Invalid --switches specification (from %s=%s)", k, v))
	}
	st.spec.SwitchWait = secs
	return nil
}

// HasOption reports whether sbatch's table has an option of long name
// long (srun and salloc check their variable lists with it).
func HasOption(long string) bool { return optionIndex(long) >= 0 }

// optionIndex is the table index of the option with long name long, -1
// if there is none.
func optionIndex(long string) int {
	for i := range options {
		if options[i].Long == long {
			return i
		}
	}
	return -1
}
