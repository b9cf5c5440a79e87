package wiregen

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// Kind is how a type travels in JSON.
type Kind int

// The kinds the generator handles. Anything else (interfaces, channels,
// functions, complex numbers, arrays, byte slices, float32) is an error.
const (
	KindString Kind = iota
	KindBool
	KindInt
	KindUint
	KindFloat
	KindTime
	KindPtr
	KindSlice
	KindMap
	KindStruct
)

// Type is a Go type as the generated code sees it.
type Type struct {
	Kind Kind
	// Expr spells the type in the generated file ("JobState",
	// "gres.Status", "[]NodeAlloc", "*SignalSpec").
	Expr string
	// Basic is the predeclared type underneath a string, bool or number
	// ("int", "uint32"); Named reports a defined type over it (JobState
	// over string), which conversions must name.
	Basic string
	Named bool
	// Ident names a struct's generated functions ("JobSpec",
	// "GresStatus").
	Ident string
	// IsZeroer marks a defined type with an IsZero() bool method (or
	// its pointer with one), which omitzero calls.
	IsZeroer bool
	// Elem is a pointer's, slice's or map's element; Key a map's key.
	Elem, Key *Type
	// Fields are a struct's JSON fields in encoding/json's order, those
	// of embedded structs flattened in place.
	Fields []*Field
	// pkg is the import path of a defined type from another package
	// than the generated file's, which spelling it imports.
	pkg string
}

// Field is one JSON field of a struct.
type Field struct {
	// Key is the JSON name.
	Key string
	// Path reaches the field from the struct (".JobSpec.Name").
	Path string
	Type *Type
	// OmitEmpty and OmitZero are the tag's options.
	OmitEmpty, OmitZero bool
}

// Scalar reports whether decoding t overwrites the whole value, so
// that a repeated key in a document leaves only the last value, as
// encoding/json does.
func (t *Type) Scalar() bool {
	switch t.Kind {
	case KindString, KindBool, KindInt, KindUint, KindFloat, KindTime:
		return true
	}
	return false
}

// loader parses the module's packages the types come from and resolves
// type expressions to Types.
type loader struct {
	fset    *token.FileSet
	modRoot string // directory holding go.mod
	modPath string // its module path
	// out is the import path of the package the code is generated into
	// (its types are spelled without a qualifier).
	out string
	// skip is the generated file itself, left out of the parse so that
	// a stale one never matters.
	skip string

	pkgs  map[string]*pkgInfo // by import path
	types map[string]*Type    // resolved defined types, by "path.Name"
	busy  map[string]bool     // structs being resolved, to refuse recursion
}

type pkgInfo struct {
	path, name, dir string
	decls           map[string]*typeDecl
	// methods lists each receiver base type's method names; isZero
	// the types with an IsZero() bool method.
	methods map[string]map[string]bool
	isZero  map[string]bool
}

type typeDecl struct {
	pkg  *pkgInfo
	spec *ast.TypeSpec
	file *ast.File
}

func newLoader(dir, skip string) (*loader, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, mod, err := findModule(abs)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	out := mod
	if rel != "." {
		out = mod + "/" + filepath.ToSlash(rel)
	}
	return &loader{fset: token.NewFileSet(), modRoot: root, modPath: mod, out: out, skip: skip,
		pkgs: map[string]*pkgInfo{}, types: map[string]*Type{}, busy: map[string]bool{}}, nil
}

// findModule finds the go.mod at or above dir and returns its directory
// and module path.
func findModule(dir string) (string, string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		f, err := os.Open(filepath.Join(d, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return d, strings.Trim(strings.TrimSpace(mod), `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s/go.mod names no module", d)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}

// pkg parses the package at import path p (of this module) once.
func (l *loader) pkg(p string) (*pkgInfo, error) {
	if pi, ok := l.pkgs[p]; ok {
		return pi, nil
	}
	rel, ok := strings.CutPrefix(p, l.modPath)
	if !ok || (rel != "" && rel[0] != '/') {
		return nil, fmt.Errorf("package %s is outside module %s", p, l.modPath)
	}
	dir := filepath.Join(l.modRoot, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", p, err)
	}
	pi := &pkgInfo{path: p, dir: dir, decls: map[string]*typeDecl{}, methods: map[string]map[string]bool{}, isZero: map[string]bool{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if p == l.out && name == l.skip {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		pi.name = f.Name.Name
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok != token.TYPE {
					continue
				}
				for _, s := range d.Specs {
					ts := s.(*ast.TypeSpec)
					pi.decls[ts.Name.Name] = &typeDecl{pkg: pi, spec: ts, file: f}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				base := recvBase(d.Recv.List[0].Type)
				if pi.methods[base] == nil {
					pi.methods[base] = map[string]bool{}
				}
				pi.methods[base][d.Name.Name] = true
				if d.Name.Name == "IsZero" && isZeroSig(d.Type) {
					pi.isZero[base] = true
				}
			}
		}
	}
	if pi.name == "" {
		return nil, fmt.Errorf("package %s: no Go files in %s", p, dir)
	}
	l.pkgs[p] = pi
	return pi, nil
}

// recvBase is the type name of a method receiver (T, *T, T[P]).
func recvBase(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// isZeroSig reports whether a method has IsZero's signature, func()
// bool, which encoding/json's omitzero looks for.
func isZeroSig(ft *ast.FuncType) bool {
	if ft.Params.NumFields() != 0 || ft.Results.NumFields() != 1 {
		return false
	}
	id, ok := ft.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == "bool"
}

// customCodecs are the methods through which encoding/json would bypass
// a generated codec.
var customCodecs = []string{"MarshalJSON", "UnmarshalJSON", "MarshalText", "UnmarshalText"}

// named resolves the defined type name in package p.
func (l *loader) named(p, name string) (*Type, error) {
	key := p + "." + name
	if t, ok := l.types[key]; ok {
		return t, nil
	}
	if l.busy[key] {
		return nil, fmt.Errorf("type %s is recursive, which the generator does not handle", key)
	}
	pi, err := l.pkg(p)
	if err != nil {
		return nil, err
	}
	d, ok := pi.decls[name]
	if !ok {
		return nil, fmt.Errorf("type %s not found in package %s", name, p)
	}
	if d.spec.TypeParams != nil {
		return nil, fmt.Errorf("type %s is generic, which the generator does not handle", key)
	}
	if d.spec.Assign.IsValid() { // an alias: the type it names
		return l.expr(d, d.spec.Type)
	}
	for _, m := range customCodecs {
		if pi.methods[name][m] {
			return nil, fmt.Errorf("type %s has a %s method, which encoding/json would call: the generator writes no custom codecs (drop the method or the type's place on the wire)", key, m)
		}
	}
	l.busy[key] = true
	defer delete(l.busy, key)
	under, err := l.expr(d, d.spec.Type)
	if err != nil {
		return nil, fmt.Errorf("type %s: %w", key, err)
	}
	t := *under
	t.Named = true
	t.IsZeroer = pi.isZero[name] || under.IsZeroer
	t.Expr, t.pkg = name, ""
	if p != l.out {
		t.Expr, t.pkg = pi.name+"."+name, p
	}
	if t.Kind == KindStruct {
		t.Ident = name
		if p != l.out {
			t.Ident = exportName(pi.name) + name
		}
	}
	l.types[key] = &t
	return &t, nil
}

func exportName(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var basics = map[string]Kind{
	"string": KindString, "bool": KindBool,
	"int": KindInt, "int8": KindInt, "int16": KindInt, "int32": KindInt, "int64": KindInt, "rune": KindInt,
	"uint": KindUint, "uint8": KindUint, "uint16": KindUint, "uint32": KindUint, "uint64": KindUint, "byte": KindUint,
	"float64": KindFloat,
}

// expr resolves a type expression written in d's file.
func (l *loader) expr(d *typeDecl, e ast.Expr) (*Type, error) {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return l.expr(d, x.X)
	case *ast.Ident:
		if k, ok := basics[x.Name]; ok {
			if _, shadowed := d.pkg.decls[x.Name]; !shadowed {
				b := x.Name
				switch b {
				case "rune":
					b = "int32"
				case "byte":
					b = "uint8"
				}
				return &Type{Kind: k, Expr: b, Basic: b}, nil
			}
		}
		if _, ok := d.pkg.decls[x.Name]; !ok {
			return nil, fmt.Errorf("type %s is not one the generator handles (float32, complex numbers, uintptr, interfaces and unsafe pointers are not)", x.Name)
		}
		return l.named(d.pkg.path, x.Name)
	case *ast.SelectorExpr:
		pkgIdent, ok := x.X.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("cannot resolve type %s", exprString(e))
		}
		imp, err := l.importPath(d.file, pkgIdent.Name)
		if err != nil {
			return nil, err
		}
		if imp == "time" && x.Sel.Name == "Time" {
			return &Type{Kind: KindTime, Expr: "time.Time"}, nil
		}
		if !strings.HasPrefix(imp+"/", l.modPath+"/") {
			return nil, fmt.Errorf("type %s.%s (package %s) is outside the module; only time.Time is handled", pkgIdent.Name, x.Sel.Name, imp)
		}
		return l.named(imp, x.Sel.Name)
	case *ast.StarExpr:
		elem, err := l.expr(d, x.X)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: KindPtr, Expr: "*" + elem.Expr, Elem: elem}, nil
	case *ast.ArrayType:
		if x.Len != nil {
			return nil, fmt.Errorf("array type %s: arrays are not handled (use a slice)", exprString(e))
		}
		elem, err := l.expr(d, x.Elt)
		if err != nil {
			return nil, err
		}
		if elem.Kind == KindUint && elem.Basic == "uint8" {
			return nil, fmt.Errorf("byte slice %s: encoding/json writes base64, which the generator does not", exprString(e))
		}
		return &Type{Kind: KindSlice, Expr: "[]" + elem.Expr, Elem: elem}, nil
	case *ast.MapType:
		key, err := l.expr(d, x.Key)
		if err != nil {
			return nil, err
		}
		if key.Kind != KindString && key.Kind != KindInt && key.Kind != KindUint {
			return nil, fmt.Errorf("map key type %s: only strings and integers are handled", key.Expr)
		}
		elem, err := l.expr(d, x.Value)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: KindMap, Expr: "map[" + key.Expr + "]" + elem.Expr, Key: key, Elem: elem}, nil
	case *ast.StructType:
		if d.spec.Type != e {
			return nil, fmt.Errorf("anonymous struct type: declare it as a named type")
		}
		t := &Type{Kind: KindStruct}
		if err := l.fields(d, x, "", t, map[string]string{}); err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, fmt.Errorf("type %s is not one the generator handles", exprString(e))
}

// importPath finds the import a file names name.
func (l *loader) importPath(f *ast.File, name string) (string, error) {
	for _, is := range f.Imports {
		p, err := strconv.Unquote(is.Path.Value)
		if err != nil {
			return "", err
		}
		local := ""
		switch {
		case is.Name != nil:
			local = is.Name.Name
		case strings.HasPrefix(p+"/", l.modPath+"/"):
			pi, err := l.pkg(p)
			if err != nil {
				return "", err
			}
			local = pi.name
		default:
			local = path.Base(p)
		}
		if local == name {
			return p, nil
		}
	}
	return "", fmt.Errorf("no import named %s", name)
}

// fields appends the JSON fields of struct st to t, embedded structs
// flattened in place (at path prefix). seen maps each JSON name to the
// Go field that has it.
func (l *loader) fields(d *typeDecl, st *ast.StructType, prefix string, t *Type, seen map[string]string) error {
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				return err
			}
			tag = reflect.StructTag(s).Get("json")
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		var omitEmpty, omitZero bool
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				omitEmpty = true
			case "omitzero":
				omitZero = true
			default:
				return fmt.Errorf("field %s: tag option %q is not handled", fieldName(f), o)
			}
		}
		if len(f.Names) == 0 { // embedded
			if _, ok := f.Type.(*ast.StarExpr); ok {
				return fmt.Errorf("embedded pointer %s: not handled", exprString(f.Type))
			}
			goName := embeddedName(f.Type)
			if !ast.IsExported(goName) {
				return fmt.Errorf("embedded %s is unexported: not handled", goName)
			}
			if name == "" {
				et, err := l.expr(d, f.Type)
				if err != nil {
					return fmt.Errorf("field %s: %w", goName, err)
				}
				if et.Kind == KindTime {
					return fmt.Errorf("embedded time.Time: encoding/json would marshal the whole struct as the time")
				}
				if et.Kind != KindStruct {
					return fmt.Errorf("embedded %s is not a struct: not handled", goName)
				}
				if omitEmpty || omitZero {
					return fmt.Errorf("embedded %s: options on an embedded struct are not handled", goName)
				}
				if et.IsZeroer {
					// Promoted, and then omitzero calls it.
					if t.IsZeroer {
						return fmt.Errorf("embedded %s: a second embedded IsZero method (ambiguous) is not handled", goName)
					}
					t.IsZeroer = true
				}
				for _, ef := range et.Fields {
					cp := *ef
					cp.Path = prefix + "." + goName + ef.Path
					if other, dup := seen[cp.Key]; dup {
						return fmt.Errorf("JSON name %q of %s is also %s's: encoding/json's shadowing rules are not handled (rename one)", cp.Key, cp.Path, other)
					}
					seen[cp.Key] = cp.Path
					t.Fields = append(t.Fields, &cp)
				}
				continue
			}
			if err := l.field(d, f.Type, goName, prefix, name, omitEmpty, omitZero, t, seen); err != nil {
				return err
			}
			continue
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			if err := l.field(d, f.Type, n.Name, prefix, name, omitEmpty, omitZero, t, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loader) field(d *typeDecl, te ast.Expr, goName, prefix, key string, omitEmpty, omitZero bool, t *Type, seen map[string]string) error {
	if key == "" {
		key = goName
	}
	if !plainKey(key) {
		return fmt.Errorf("field %s: JSON name %q: only ASCII letters, digits, '_', '-' and '.' are handled", goName, key)
	}
	ft, err := l.expr(d, te)
	if err != nil {
		return fmt.Errorf("field %s: %w", goName, err)
	}
	if omitZero && ft.Kind == KindStruct && !ft.IsZeroer {
		return fmt.Errorf("field %s: omitzero on a struct without an IsZero method is not handled", goName)
	}
	p := prefix + "." + goName
	if other, dup := seen[key]; dup {
		return fmt.Errorf("JSON name %q of %s is also %s's: encoding/json's shadowing rules are not handled (rename one)", key, p, other)
	}
	seen[key] = p
	t.Fields = append(t.Fields, &Field{Key: key, Path: p, Type: ft, OmitEmpty: omitEmpty, OmitZero: omitZero})
	return nil
}

// plainKey reports whether a JSON name is valid for encoding/json and
// needs no escaping.
func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return exprString(e)
}

func fieldName(f *ast.Field) string {
	if len(f.Names) > 0 {
		return f.Names[0].Name
	}
	return embeddedName(f.Type)
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	case *ast.ArrayType:
		if x.Len != nil {
			return "[...]" + exprString(x.Elt)
		}
		return "[]" + exprString(x.Elt)
	case *ast.MapType:
		return "map[" + exprString(x.Key) + "]" + exprString(x.Value)
	case *ast.InterfaceType:
		return "interface{...}"
	case *ast.StructType:
		return "struct{...}"
	case *ast.FuncType:
		return "func(...)"
	case *ast.ChanType:
		return "chan " + exprString(x.Value)
	}
	return fmt.Sprintf("%T", e)
}
