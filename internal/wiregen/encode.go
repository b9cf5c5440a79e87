package wiregen

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// gen writes the generated functions. Struct functions are queued as
// the roots reach them and written in that order, so the output only
// changes with the types.
type gen struct {
	l    *loader
	body bytes.Buffer
	// uses are the import paths the functions call into.
	uses map[string]bool

	queue []func()
	done  map[string]bool
	fails map[string]bool // memo of canFail for structs
	// pending is JSON text to append before the next statement, so
	// that neighbouring constant parts ("},\"key\":[") are one append.
	pending string
}

const (
	pkgJSONFast = "github.com/tide-hpc/tide/internal/jsonfast"
	pkgStrconv  = "strconv"
	pkgSlices   = "slices"
)

func (g *gen) p(format string, args ...any) {
	if g.pending != "" {
		lit := g.pending
		g.pending = ""
		switch {
		case len(lit) == 1:
			g.p("b = append(b, %s)", strconv.QuoteRune(rune(lit[0])))
		case strings.ContainsAny(lit, "`\n"):
			g.p("b = append(b, %s...)", strconv.Quote(lit))
		default:
			g.p("b = append(b, `%s`...)", lit)
		}
	}
	fmt.Fprintf(&g.body, format, args...)
	g.body.WriteByte('\n')
}

// typ spells t in the generated file, importing what that names.
func (g *gen) typ(t *Type) string {
	g.imports(t)
	return t.Expr
}

func (g *gen) imports(t *Type) {
	switch {
	case t.pkg != "":
		g.uses[t.pkg] = true
	case t.Named:
	case t.Kind == KindTime:
		g.uses["time"] = true
	case t.Kind == KindMap:
		g.imports(t.Key)
		g.imports(t.Elem)
	case t.Kind == KindPtr || t.Kind == KindSlice:
		g.imports(t.Elem)
	}
}

// lit appends constant JSON text to b (at the next statement).
func (g *gen) lit(s string) { g.pending += s }

// once queues emit under key unless it was queued before.
func (g *gen) once(key string, emit func()) {
	if g.done == nil {
		g.done = map[string]bool{}
	}
	if g.done[key] {
		return
	}
	g.done[key] = true
	g.queue = append(g.queue, emit)
}

// flush writes what the roots queued, and what that queues in turn.
func (g *gen) flush() {
	for len(g.queue) > 0 {
		f := g.queue[0]
		g.queue = g.queue[1:]
		f()
	}
}

// canFail reports whether encoding t can fail as json.Marshal can: on a
// time RFC 3339 cannot spell, or a NaN or infinite float.
func (g *gen) canFail(t *Type) bool {
	switch t.Kind {
	case KindTime, KindFloat:
		return true
	case KindPtr, KindSlice, KindMap:
		return g.canFail(t.Elem)
	case KindStruct:
		if g.fails == nil {
			g.fails = map[string]bool{}
		}
		if v, ok := g.fails[t.Ident]; ok {
			return v
		}
		v := false
		for _, f := range t.Fields {
			v = v || g.canFail(f.Type)
		}
		g.fails[t.Ident] = v
		return v
	}
	return false
}

// encodeRoot writes t's AppendJSON method.
func (g *gen) encodeRoot(t *Type) {
	g.once("root-append "+t.Ident, func() {
		g.uses[pkgSlices] = true
		g.p("")
		g.p("// AppendJSON appends to b the bytes json.Marshal(v) produces and")
		g.p("// returns the extended slice.")
		if g.canFail(t) {
			g.p("// It fails where json.Marshal fails (a time that RFC 3339 cannot")
			g.p("// spell, a NaN or infinite float), returning b at its original")
			g.p("// length and the error json.Marshal returns.")
			g.p("func (v *%s) AppendJSON(b []byte) ([]byte, error) {", t.Expr)
			g.p("if v == nil {")
			g.p(`return append(b, "null"...), nil`)
			g.p("}")
			g.p("n0, n := len(b), sizeJSON%s(v)", t.Ident)
			g.p("b, err := appendJSON%s(slices.Grow(b, n+n/16), v)", t.Ident)
			g.p("if err != nil {")
			g.p("return b[:n0], err")
			g.p("}")
			g.p("return b, nil")
		} else {
			g.p("func (v *%s) AppendJSON(b []byte) []byte {", t.Expr)
			g.p("if v == nil {")
			g.p(`return append(b, "null"...)`)
			g.p("}")
			g.p("n := sizeJSON%s(v)", t.Ident)
			g.p("return appendJSON%s(slices.Grow(b, n+n/16), v)", t.Ident)
		}
		g.p("}")
		g.structAppend(t)
		g.structSize(t)
	})
}

// structAppend queues appendJSON<T>, which writes one object.
func (g *gen) structAppend(t *Type) {
	g.once("append "+t.Ident, func() {
		fail := g.canFail(t)
		ret, retErr := "b", "b"
		g.p("")
		if fail {
			ret, retErr = "b, nil", "b, err"
			g.p("func appendJSON%s(b []byte, v *%s) ([]byte, error) {", t.Ident, g.typ(t))
			g.p("var err error")
		} else {
			g.p("func appendJSON%s(b []byte, v *%s) []byte {", t.Ident, g.typ(t))
		}
		if len(t.Fields) == 0 {
			g.p(`return append(b, "{}"...)%s`, strings.TrimPrefix(ret, "b"))
			g.p("}")
			return
		}
		// When the first field is always written the commas are known;
		// otherwise every field is written after a comma and the first
		// comma becomes the brace.
		static := omitCond(t.Fields[0], "v"+t.Fields[0].Path) == ""
		if !static {
			g.p("start := len(b)")
		}
		for i, f := range t.Fields {
			x := "v" + f.Path
			key := `,"` + f.Key + `":`
			if i == 0 && static {
				key = `{"` + f.Key + `":`
			}
			cond := omitCond(f, x)
			if cond != "" {
				g.p("if %s {", cond)
			}
			if f.Type.Kind == KindBool && cond == x {
				g.lit(key + "true")
			} else {
				g.lit(key)
				g.value(f.Type, x, cond != "", 0, retErr)
			}
			if cond != "" {
				g.p("}")
			}
		}
		if !static {
			g.p("if len(b) == start {")
			g.p(`return append(b, "{}"...)%s`, strings.TrimPrefix(ret, "b"))
			g.p("}")
			g.p("b[start] = '{'")
		}
		g.lit("}")
		g.p("return %s", ret)
		g.p("}")
	})
}

// omitCond is the condition under which field f (at x) is written, ""
// when it always is: encoding/json's omitempty (false, 0, "", nil, an
// empty slice or map; never a struct) and omitzero (the IsZero method
// where the type, or its pointer, has one, a nil pointer never calling
// it; else the zero value).
func omitCond(f *Field, x string) string {
	var conds []string
	add := func(cs ...string) {
		for _, c := range cs {
			if !slices.Contains(conds, c) {
				conds = append(conds, c)
			}
		}
	}
	t := f.Type
	if f.OmitEmpty {
		switch t.Kind {
		case KindString:
			add(x + ` != ""`)
		case KindBool:
			add(x)
		case KindInt, KindUint, KindFloat:
			add(x + " != 0")
		case KindPtr:
			add(x + " != nil")
		case KindSlice, KindMap:
			add("len(" + x + ") != 0")
		}
	}
	if f.OmitZero {
		switch {
		case t.Kind == KindTime || t.IsZeroer:
			add("!" + x + ".IsZero()")
		case t.Kind == KindPtr && (t.Elem.Kind == KindTime || t.Elem.IsZeroer):
			add(x+" != nil", "!"+x+".IsZero()")
		case t.Kind == KindString:
			add(x + ` != ""`)
		case t.Kind == KindBool:
			add(x)
		case t.Kind == KindInt || t.Kind == KindUint || t.Kind == KindFloat:
			add(x + " != 0")
		case t.Kind == KindPtr:
			add(x + " != nil")
		case (t.Kind == KindSlice || t.Kind == KindMap) && !f.OmitEmpty:
			add(x + " != nil") // an empty one is not omitted, unless omitempty says so
		}
	}
	return strings.Join(conds, " && ")
}

// value writes statements appending the JSON of x (of type t) to b.
// nonNil says a nilable x is known not to be nil; depth numbers loop
// variables; retErr is what a failing encoder returns.
func (g *gen) value(t *Type, x string, nonNil bool, depth int, retErr string) {
	switch t.Kind {
	case KindString:
		g.uses[pkgJSONFast] = true
		g.p("b = jsonfast.AppendString(b, %s)", conv("string", t, x))
	case KindBool:
		g.uses[pkgStrconv] = true
		g.p("b = strconv.AppendBool(b, %s)", conv("bool", t, x))
	case KindInt:
		g.uses[pkgStrconv] = true
		g.p("b = strconv.AppendInt(b, %s, 10)", conv("int64", t, x))
	case KindUint:
		g.uses[pkgStrconv] = true
		g.p("b = strconv.AppendUint(b, %s, 10)", conv("uint64", t, x))
	case KindFloat:
		g.uses[pkgJSONFast] = true
		g.p("if b, err = jsonfast.AppendFloat(b, %s); err != nil {", conv("float64", t, x))
		g.p("return %s", retErr)
		g.p("}")
	case KindTime:
		g.uses[pkgJSONFast] = true
		g.p("if b, err = jsonfast.AppendTime(b, %s); err != nil {", x)
		g.p("return %s", retErr)
		g.p("}")
	case KindStruct:
		g.structAppend(t)
		g.callAppend(t, addr(x), retErr)
	case KindPtr:
		if !nonNil {
			g.p("if %s == nil {", x)
			g.lit("null")
			g.p("} else {")
		}
		switch t.Elem.Kind {
		case KindStruct:
			g.structAppend(t.Elem)
			g.callAppend(t.Elem, x, retErr)
		case KindTime:
			// json.Marshal names the pointer's type in its error.
			g.uses[pkgJSONFast] = true
			g.p("if b, err = jsonfast.AppendTimePtr(b, %s); err != nil {", x)
			g.p("return %s", retErr)
			g.p("}")
		default:
			g.value(t.Elem, "(*"+x+")", false, depth, retErr)
		}
		if !nonNil {
			g.p("}")
		}
	case KindSlice:
		if !nonNil {
			g.p("if %s == nil {", x)
			g.lit("null")
			g.p("} else {")
		}
		i := fmt.Sprintf("i%d", depth)
		g.lit("[")
		g.p("for %s := range %s {", i, x)
		g.p("if %s > 0 {", i)
		g.lit(",")
		g.p("}")
		g.value(t.Elem, x+"["+i+"]", false, depth+1, retErr)
		g.p("}")
		g.lit("]")
		if !nonNil {
			g.p("}")
		}
	case KindMap:
		g.uses[pkgJSONFast] = true
		if !nonNil {
			g.p("if %s == nil {", x)
			g.lit("null")
			g.p("} else {")
		}
		i, k, e := fmt.Sprintf("i%d", depth), fmt.Sprintf("k%d", depth), fmt.Sprintf("e%d", depth)
		g.lit("{")
		switch t.Key.Kind {
		case KindString:
			g.p("for %s, %s := range jsonfast.StringKeys(%s) {", i, k, x)
		case KindInt:
			g.p("for %s, %s := range jsonfast.IntKeys(%s) {", i, k, x)
		default:
			g.p("for %s, %s := range jsonfast.UintKeys(%s) {", i, k, x)
		}
		g.p("if %s > 0 {", i)
		g.lit(",")
		g.p("}")
		switch t.Key.Kind {
		case KindString:
			g.p("b = append(jsonfast.AppendString(b, %s), ':')", conv("string", t.Key, k))
		case KindInt:
			g.uses[pkgStrconv] = true
			g.p("b = append(strconv.AppendInt(append(b, '\"'), %s, 10), '\"', ':')", conv("int64", t.Key, k))
		default:
			g.uses[pkgStrconv] = true
			g.p("b = append(strconv.AppendUint(append(b, '\"'), %s, 10), '\"', ':')", conv("uint64", t.Key, k))
		}
		g.p("%s := %s[%s]", e, x, k)
		g.value(t.Elem, e, false, depth+1, retErr)
		g.p("}")
		g.lit("}")
		if !nonNil {
			g.p("}")
		}
	}
}

func (g *gen) callAppend(t *Type, ptr, retErr string) {
	if g.canFail(t) {
		g.p("if b, err = appendJSON%s(b, %s); err != nil {", t.Ident, ptr)
		g.p("return %s", retErr)
		g.p("}")
		return
	}
	g.p("b = appendJSON%s(b, %s)", t.Ident, ptr)
}

// conv converts x of type t to the predeclared type basic, unless it
// is one already.
func conv(basic string, t *Type, x string) string {
	if !t.Named && t.Basic == basic {
		return x
	}
	return basic + "(" + x + ")"
}

// addr is &x, with &(*p) spelled p.
func addr(x string) string {
	if strings.HasPrefix(x, "(*") && strings.HasSuffix(x, ")") {
		return x[2 : len(x)-1]
	}
	return "&" + x
}

// Fixed sizes of encoded values, for the size guesses: a typical
// number of so many bits (ids, megabytes and counts rarely take all the
// digits of 64 bits, and a guess too large costs clearing as much
// memory), a float's longest shortest form, an RFC 3339 time with
// nanoseconds and offset, quoted.
func fixedSize(t *Type) int {
	switch t.Kind {
	case KindBool:
		return 5
	case KindInt, KindUint:
		switch t.Basic {
		case "int8", "uint8":
			return 4
		case "int16", "uint16", "int32", "uint32":
			return 6
		}
		return 12
	case KindFloat:
		return 24
	case KindTime:
		return 37
	case KindString, KindSlice, KindMap:
		return 2
	case KindPtr:
		return 4 // null; the element's own size is added when set
	}
	return 0
}

// structSize queues sizeJSON<T>, a guess of the encoded size that is
// rarely short (strings with many escapes or huge numbers make it so;
// AppendJSON adds a sixteenth), so that AppendJSON allocates once.
func (g *gen) structSize(t *Type) {
	g.once("size "+t.Ident, func() {
		var fixed int
		var lines bytes.Buffer
		line := func(format string, args ...any) {
			fmt.Fprintf(&lines, format, args...)
			lines.WriteByte('\n')
		}
		for _, f := range t.Fields {
			x := "v" + f.Path
			n := len(f.Key) + 4 + fixedSize(f.Type)
			dyn := g.sizeDyn(f.Type, x, 0)
			cond := omitCond(f, x)
			if cond == "" {
				fixed += n
				lines.WriteString(dyn)
				continue
			}
			line("if %s {", cond)
			line("n += %d", n)
			lines.WriteString(dyn)
			line("}")
		}
		g.p("")
		g.p("func sizeJSON%s(v *%s) int {", t.Ident, g.typ(t))
		g.p("n := %d", fixed+2)
		g.body.Write(lines.Bytes())
		g.p("return n")
		g.p("}")
	})
}

// sizeDyn returns statements adding to n the part of x's size that
// fixedSize does not know.
func (g *gen) sizeDyn(t *Type, x string, depth int) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	switch t.Kind {
	case KindString:
		line("n += len(%s)", x)
	case KindStruct:
		g.structSize(t)
		line("n += sizeJSON%s(%s)", t.Ident, addr(x))
	case KindPtr:
		if inner := g.sizeDyn(t.Elem, "(*"+x+")", depth); inner != "" || fixedSize(t.Elem) > 4 {
			line("if %s != nil {", x)
			if s := fixedSize(t.Elem); s > 4 {
				line("n += %d", s-4)
			}
			b.WriteString(inner)
			line("}")
		}
	case KindSlice:
		line("n += %d * len(%s)", fixedSize(t.Elem)+1, x)
		i := fmt.Sprintf("i%d", depth)
		if inner := g.sizeDyn(t.Elem, x+"["+i+"]", depth+1); inner != "" {
			line("for %s := range %s {", i, x)
			b.WriteString(inner)
			line("}")
		}
	case KindMap:
		keySize := 22
		if t.Key.Kind == KindString {
			keySize = 3
		}
		line("n += %d * len(%s)", keySize+fixedSize(t.Elem)+1, x)
		k, e := fmt.Sprintf("k%d", depth), fmt.Sprintf("e%d", depth)
		inner := g.sizeDyn(t.Elem, e, depth+1)
		switch {
		case t.Key.Kind == KindString && inner != "":
			line("for %s, %s := range %s {", k, e, x)
			line("n += len(%s)", k)
			b.WriteString(inner)
			line("}")
		case t.Key.Kind == KindString:
			line("for %s := range %s {", k, x)
			line("n += len(%s)", k)
			line("}")
		case inner != "":
			line("for _, %s := range %s {", e, x)
			b.WriteString(inner)
			line("}")
		}
	}
	return b.String()
}
