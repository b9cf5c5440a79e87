package slurmfmt

import (
	"strings"
	"sync"
)

// Index finds a command's field definitions by -o letter or -O name. It
// is built on first use, not at package initialisation: every CLI
// command is the same binary, and sbatch should not pay for building
// squeue's and sinfo's tables each time it starts. Commands declare it
// as a package variable with Build and Keys set, which the compiler lays
// out with nothing to run at initialisation.
type Index[F any] struct {
	// Build returns the fields in definition order; Keys names a
	// field's letter (0 for none) and its -O names.
	Build func() []F
	Keys  func(*F) (byte, []string)

	once sync.Once
	// fields in definition order; letter[c] is 1 + the index of the
	// field with letter c, 0 for none; name maps lower-cased names.
	fields []F
	letter [128]int
	name   map[string]int
}

func (x *Index[F]) init() {
	x.once.Do(func() {
		fields, keys := x.Build(), x.Keys
		x.fields, x.name = fields, make(map[string]int, len(fields)*2)
		for i := range fields {
			c, names := keys(&fields[i])
			if c != 0 && c < 128 {
				x.letter[c] = i + 1
			}
			for _, n := range names {
				x.name[strings.ToLower(n)] = i
			}
		}
	})
}

// ByLetter returns the field of -o letter name (a one-character string).
func (x *Index[F]) ByLetter(name string) (*F, bool) {
	x.init()
	if len(name) != 1 || name[0] >= 128 || x.letter[name[0]] == 0 {
		return nil, false
	}
	return &x.fields[x.letter[name[0]]-1], true
}

// ByName returns the field of -O name, in any case.
func (x *Index[F]) ByName(name string) (*F, bool) {
	x.init()
	i, ok := x.name[strings.ToLower(name)]
	if !ok {
		return nil, false
	}
	return &x.fields[i], true
}

// Lookup returns ByName for long (-O) formats, else ByLetter.
func (x *Index[F]) Lookup(name string, long bool) (*F, bool) {
	if long {
		return x.ByName(name)
	}
	return x.ByLetter(name)
}
