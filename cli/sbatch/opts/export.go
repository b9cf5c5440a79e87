package opts

import (
	"strings"

	"github.com/tide-hpc/tide/internal/envlist"
)

// exportEnv builds the job's environment from --export and the caller's
// environment, as sbatch does:
//
//	"" or ALL    the whole caller environment
//	NONE         only the caller's SLURM_* variables
//	a list       its items in order: ALL merges the caller environment,
//	             NAME copies the caller's NAME, NAME=value sets it; the
//	             caller's SLURM_* variables are added last
//
// A value may be quoted to hold commas (NAME="a,b").
func exportEnv(spec string, environ []string) ([]string, error) {
	caller := envlist.FromEntries(environ)
	out := envlist.New(0)
	addSlurm := func() {
		caller.Each(func(k, _, kv string) {
			if strings.HasPrefix(k, "SLURM_") {
				out.SetEntry(k, kv)
			}
		})
	}
	s := strings.TrimSpace(spec)
	switch {
	case s == "" || strings.EqualFold(s, "ALL"):
		return caller.Entries(), nil
	case strings.EqualFold(s, "NONE"):
		addSlurm()
		return out.Entries(), nil
	}
	items, err := splitQuoted(s)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		switch {
		case strings.EqualFold(item, "ALL"):
			caller.Each(func(k, _, kv string) { out.SetEntry(k, kv) })
			continue
		case strings.EqualFold(item, "NONE"):
			return nil, errorf("Invalid --export specification: NONE cannot be combined with variables")
		}
		k, v, hasVal := strings.Cut(item, "=")
		if !validEnvName(k) {
			return nil, errorf("Invalid --export specification: %q is not a variable name", k)
		}
		if hasVal {
			out.Set(k, unquote(v))
		} else if kv, ok := caller.Entry(k); ok {
			out.SetEntry(k, kv)
		}
	}
	addSlurm()
	return out.Entries(), nil
}

// splitQuoted splits a comma list, keeping commas inside quotes.
func splitQuoted(s string) ([]string, error) {
	var (
		out   []string
		start int
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quote != 0 {
		return nil, errorf("Invalid --export specification: unmatched %c", quote)
	}
	out = append(out, s[start:])
	var items []string
	for _, it := range out {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return nil, errorf("Invalid --export specification: empty list")
	}
	return items, nil
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}
