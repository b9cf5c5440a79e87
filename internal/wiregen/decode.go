package wiregen

import "fmt"

// The readers take what the encoders write, field by field through
// jsonfast.Decoder, and report false on anything else; the caller (the
// generated decodeJSON<T>, through jsonfast.Fallback) then decodes the
// whole document with encoding/json, whose result and error are the
// reference. Where they accept input
// the encoders never write they do what encoding/json does with it:
//
//   - a key repeated: a scalar takes the last value; a struct, or the
//     struct a pointer points to, takes the second object's fields in
//     place (encoding/json merges); a slice of anything but scalars is
//     refused (encoding/json merges the second array into the first's
//     elements, which the readers do not mimic);
//   - null: a pointer, slice or map becomes nil; anywhere else it is
//     refused (encoding/json leaves the value as it is);
//   - unknown keys, keys in another case, escaped keys, numbers with a
//     fraction or out of range are refused;
//   - maps are handed to encoding/json on their own (jsonfast's Value),
//     merging as encoding/json does, with unknown fields refused (so
//     that a document whose mode allows them reaches encoding/json
//     whole).

var modeNames = map[Mode]string{
	ModeStream: "jsonfast.Stream",
	ModeStrict: "jsonfast.StreamStrict",
	ModeWhole:  "jsonfast.Whole",
}

var modeDocs = map[Mode]string{
	ModeStream: "a json.Decoder decodes its first value",
	ModeStrict: "a json.Decoder with DisallowUnknownFields decodes its first value",
	ModeWhole:  "json.Unmarshal does",
}

// decodeRoot writes t's reader and, with a mode, decodeJSON<T>.
func (g *gen) decodeRoot(t *Type, m Mode) {
	g.uses[pkgJSONFast] = true
	if m != ModeNone {
		g.once("root-decode "+t.Ident, func() {
			g.p("")
			g.p("// decodeJSON%s decodes data into v, a zero %s, as", t.Ident, t.Expr)
			g.p("// %s: by hand when", modeDocs[m])
			g.p("// readJSON%s takes data, else with encoding/json from the", t.Ident)
			g.p("// start, for its exact result and error.")
			g.p("func decodeJSON%s(data []byte, v *%s) error {", t.Ident, g.typ(t))
			g.p("d := jsonfast.New(data)")
			g.p("var out %s", g.typ(t))
			if m == ModeWhole {
				g.p("if readJSON%s(d, &out) && d.End() {", t.Ident)
			} else {
				g.p("if readJSON%s(d, &out) {", t.Ident)
			}
			g.p("*v = out")
			g.p("return nil")
			g.p("}")
			g.p("return jsonfast.Fallback(data, v, %s)", modeNames[m])
			g.p("}")
		})
	}
	g.structRead(t)
}

// structRead queues readJSON<T>, which reads one object into *v.
func (g *gen) structRead(t *Type) {
	g.once("read "+t.Ident, func() {
		g.p("")
		g.p("// readJSON%s reads a %s object into *v; false", t.Ident, t.Expr)
		g.p("// leaves the document to encoding/json.")
		g.p("func readJSON%s(d *jsonfast.Decoder, v *%s) bool {", t.Ident, g.typ(t))
		if len(t.Fields) == 0 {
			g.p("return d.Object(func([]byte) bool { return false })")
			g.p("}")
			return
		}
		g.p("return d.Object(func(key []byte) bool {")
		g.p("switch string(key) {")
		for _, f := range t.Fields {
			g.p("case %q:", f.Key)
			g.read(f.Type, "v"+f.Path, 0)
		}
		g.p("}")
		g.p("return false")
		g.p("})")
		g.p("}")
	})
}

// read writes statements that read a value into x (of type t) and
// return whether that worked; depth numbers closure variables.
func (g *gen) read(t *Type, x string, depth int) {
	p := addr(x)
	switch t.Kind {
	case KindString:
		g.readBasic(t, p, "string", "String", "ReadString")
	case KindBool:
		g.readBasic(t, p, "bool", "Bool", "ReadBool")
	case KindInt:
		switch {
		case !t.Named && t.Basic == "int":
			g.p("return d.Int(%s)", p)
		case !t.Named && t.Basic == "int64":
			g.p("return d.Int64(%s)", p)
		default:
			g.p("return jsonfast.ReadInt(d, %s)", p)
		}
	case KindUint:
		switch {
		case !t.Named && t.Basic == "uint32":
			g.p("return d.Uint32(%s)", p)
		case !t.Named && t.Basic == "uint64":
			g.p("return d.Uint64(%s)", p)
		default:
			g.p("return jsonfast.ReadUint(d, %s)", p)
		}
	case KindFloat:
		g.readBasic(t, p, "float64", "Float64", "ReadFloat")
	case KindTime:
		g.p("return d.Time(%s)", p)
	case KindStruct:
		g.structRead(t)
		g.p("return readJSON%s(d, %s)", t.Ident, p)
	case KindPtr:
		g.p("if d.Null() {")
		g.p("%s = nil", x)
		g.p("return true")
		g.p("}")
		g.p("if %s == nil {", x)
		g.p("%s = new(%s)", x, g.typ(t.Elem))
		g.p("}")
		g.read(t.Elem, "(*"+x+")", depth)
	case KindSlice:
		g.p("if d.Null() {")
		g.p("%s = nil", x)
		g.p("return true")
		g.p("}")
		if !t.Elem.Scalar() {
			g.p("if %s != nil {", x)
			g.p("return false // repeated: encoding/json merges the arrays")
			g.p("}")
		}
		switch {
		case t.Expr == "[]string":
			g.p("return d.Strings(%s)", p)
		case t.Expr == "[]int":
			g.p("return d.Ints(%s)", p)
		case t.Expr == "[]uint32":
			g.p("return d.Uint32s(%s)", p)
		default:
			e := fmt.Sprintf("e%d", depth)
			g.p("return jsonfast.Slice(d, %s, func(%s *%s) bool {", p, e, g.typ(t.Elem))
			g.read(t.Elem, "(*"+e+")", depth+1)
			g.p("})")
		}
	case KindMap:
		g.p("if d.Null() {")
		g.p("%s = nil", x)
		g.p("return true")
		g.p("}")
		// Strict: an unknown field in a struct inside the map must
		// reach encoding/json, which decides by the document's mode.
		g.p("return d.Value(%s, true)", p)
	}
}

func (g *gen) readBasic(t *Type, p, basic, method, generic string) {
	if !t.Named && t.Basic == basic {
		g.p("return d.%s(%s)", method, p)
		return
	}
	g.p("return jsonfast.%s(d, %s)", generic, p)
}
