package slurmfmt

import (
	"strings"
	"unicode/utf8"

	"github.com/tide-hpc/tide/ctld/api"
)

// MaxWidth bounds a field width so that a typo such as %99999999i is an
// error rather than a multi-gigabyte line.
const MaxWidth = 4096

// DefaultLongWidth is the width Slurm gives a -O field written without a
// size ("Name" is "Name:20").
const DefaultLongWidth = 20

// Spec is one field of a parsed format.
type Spec struct {
	// Name is the field letter ("i") in the short syntax or the field
	// name as written ("JobID") in the long one.
	Name string
	// Width is the field width; 0 prints the value as wide as it is.
	Width int
	// Right right-justifies the value (the '.' in "%.18i").
	Right bool
	// Suffix is literal text printed after the field.
	Suffix string
}

// Format is a parsed format string: literal text, then fields.
type Format struct {
	// Prefix is the literal text before the first field; it is printed
	// at the start of the header and of every row.
	Prefix string
	Specs  []Spec
}

// ParseShort parses the -o syntax: literal text, then items
// %[.][width]X, each followed by literal text up to the next '%'. "%%" is
// a literal percent sign. Letters are not checked here; Compile does that.
func ParseShort(s string) (Format, error) {
	var f Format
	var lit strings.Builder
	i := literal(s, 0, &lit)
	f.Prefix = lit.String()
	for i < len(s) {
		i++ // the '%'
		var sp Spec
		if i < len(s) && s[i] == '.' {
			sp.Right = true
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			sp.Width = sp.Width*10 + int(s[i]-'0')
			i++
			if sp.Width > MaxWidth {
				return Format{}, api.Invalid("field width %s in format %q exceeds %d", s[start:i], s, MaxWidth)
			}
		}
		if i >= len(s) {
			return Format{}, api.Invalid("format %q ends inside a field specification", s)
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		sp.Name = s[i : i+size]
		i += size
		lit.Reset()
		i = literal(s, i, &lit)
		sp.Suffix = lit.String()
		f.Specs = append(f.Specs, sp)
	}
	return f, nil
}

// literal copies text from s[i:] up to the next field into b, turning
// "%%" into '%', and returns the index of that field's '%' (or len(s)).
func literal(s string, i int, b *strings.Builder) int {
	for i < len(s) {
		if s[i] == '%' {
			if i+1 < len(s) && s[i+1] == '%' {
				b.WriteByte('%')
				i += 2
				continue
			}
			return i
		}
		b.WriteByte(s[i])
		i++
	}
	return i
}

// ParseLong parses the -O syntax: comma-separated items
// name[:[.][width][suffix]]. An item without a colon is DefaultLongWidth
// wide and left-justified, as in Slurm. Empty items are skipped.
func ParseLong(s string) (Format, error) {
	var f Format
	for _, tok := range strings.Split(s, ",") {
		if tok == "" {
			continue
		}
		sp := Spec{Width: DefaultLongWidth}
		name, opts, hasOpts := strings.Cut(tok, ":")
		if name == "" {
			return Format{}, api.Invalid("format item %q has no field name", tok)
		}
		sp.Name = name
		if hasOpts {
			sp.Width = 0
			i := 0
			if i < len(opts) && opts[i] == '.' {
				sp.Right = true
				i++
			}
			start := i
			for i < len(opts) && opts[i] >= '0' && opts[i] <= '9' {
				sp.Width = sp.Width*10 + int(opts[i]-'0')
				i++
				if sp.Width > MaxWidth {
					return Format{}, api.Invalid("field width %s in format item %q exceeds %d", opts[start:i], tok, MaxWidth)
				}
			}
			sp.Suffix = opts[i:]
		}
		f.Specs = append(f.Specs, sp)
	}
	if len(f.Specs) == 0 {
		return Format{}, api.Invalid("format %q names no fields", s)
	}
	return f, nil
}
