package mangen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/manpage"
)

// A configuration file's keys are the ones its loader accepts: the
// mapstructure tags of its Go type, which viper's UnmarshalExact decodes
// with (a key without a field is an error). Each key's type, default
// and meaning come from docs/configuration.md's tables when they have a
// row for it, else from the field's Go comment and its value in the
// defaults.

// configKey is one key of a configuration file.
type configKey struct {
	// Path is the key as written in the file: "scheduler.policy", or
	// "partitions[].name" for a field of a list's entries.
	Path string
	// List is the list the key is a field of ("partitions[]"), "" for a
	// key of the file itself.
	List string
	// Type is the field's type (pointers followed); Owner the struct
	// that holds it and Field the field, for its Go comment.
	Type  reflect.Type
	Owner reflect.Type
	Field string
	// Default is the value in the defaults ("" when it has none there).
	Default string
}

// configKeys walks a configuration type: def is its default value.
// Lists of structs give the list's own key and then their entries'
// keys.
func configKeys(def any) []configKey {
	var out []configKey
	walkKeys(reflect.TypeOf(def), reflect.ValueOf(def), "", "", &out)
	return out
}

func walkKeys(t reflect.Type, v reflect.Value, prefix, list string, out *[]configKey) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var fv reflect.Value
		if v.IsValid() {
			fv = v.Field(i)
		}
		path := prefix + name
		switch {
		case ft.Kind() == reflect.Struct && tagged(ft):
			walkKeys(ft, fv, path+".", list, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && tagged(ft.Elem()):
			*out = append(*out, configKey{Path: path, List: list, Type: ft, Owner: t, Field: f.Name, Default: formatDefault(fv)})
			walkKeys(ft.Elem(), reflect.Value{}, path+"[].", path+"[]", out)
		default:
			*out = append(*out, configKey{Path: path, List: list, Type: ft, Owner: t, Field: f.Name, Default: formatDefault(fv)})
		}
	}
}

// tagged says whether a struct is read key by key (its fields carry
// mapstructure tags) rather than from one value.
func tagged(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("mapstructure") != "" {
			return true
		}
	}
	return false
}

// formatDefault writes a default as the file would ("30s", "[]"); "" for
// none (an invalid value: a key of a list's entries).
func formatDefault(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return ""
		}
		return v.String()
	case reflect.Slice:
		if v.Len() == 0 {
			return "[]"
		}
		if v.Type().Elem().Kind() == reflect.String {
			return "[" + strings.Join(v.Interface().([]string), ", ") + "]"
		}
		return ""
	}
	return fmt.Sprint(v.Interface())
}

// typeName is a key's type in the words the docs use.
func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Slice:
		return "list"
	}
	return t.Kind().String()
}

// docRow is a key's row in a docs/configuration.md table.
type docRow struct {
	Type, Default, Meaning string
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	listHead = regexp.MustCompile("`([a-z_.]+)\\[\\]`")
	mdLink   = regexp.MustCompile(`\[([^\]]+)\]\(([a-z_]+\.md)[^)]*\)`)
)

// docSection is what docs/configuration.md says of one file's keys.
type docSection struct {
	// rows are the key tables' rows ("| key | type | default | meaning
	// |"), by key path.
	rows map[string]docRow
	// prose is the text under a heading that names a list
	// ("### `qos[]`") other than its table, by list ("qos[]").
	prose map[string][]manpage.Block
}

// readDocs reads the part of md under the level-2 heading that starts
// with heading. A table under a heading that names a list ("###
// `partitions[]`") holds that list's entries' keys.
func readDocs(md, heading string) docSection {
	d := docSection{rows: map[string]docRow{}, prose: map[string][]manpage.Block{}}
	in, inTable, inCode, prefix, list := false, false, false, "", ""
	var para, code []string
	flush := func() {
		if list != "" && len(para) > 0 {
			d.prose[list] = append(d.prose[list], manpage.Block{Text: strings.Join(para, " ")})
		}
		para = nil
	}
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if inCode && list != "" {
				d.prose[list] = append(d.prose[list], manpage.Block{Pre: strings.Join(code, "\n")})
			}
			flush()
			inCode, code = !inCode, nil
			continue
		case inCode:
			code = append(code, line)
			continue
		}
		if strings.HasPrefix(line, "## ") {
			flush()
			in = strings.HasPrefix(line, heading)
			prefix, list, inTable = "", "", false
			continue
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "#") {
			flush()
			prefix, list, inTable = "", "", false
			if m := listHead.FindStringSubmatch(line); m != nil {
				prefix, list = m[1]+"[].", m[1]+"[]"
			}
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			if strings.TrimSpace(line) == "" {
				flush()
			} else {
				para = append(para, strings.TrimSpace(line))
			}
			continue
		}
		flush()
		cells := tableCells(line)
		if len(cells) >= 4 && cells[0] == "key" && cells[1] == "type" && cells[2] == "default" {
			inTable = true
			continue
		}
		if !inTable || len(cells) < 4 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		row := docRow{Type: cells[1], Default: cells[2], Meaning: strings.Join(cells[3:], " | ")}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			d.rows[prefix+m[1]] = row
		}
	}
	flush()
	return d
}

// tableCells splits a Markdown table row at the bars outside code spans
// and not escaped ("\|").
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// goDocs returns the doc comments of the struct fields declared in the
// Go packages of dirs, by "importpath.Type.Field".
func goDocs(src, module string, pkgs []string) (map[string]string, error) {
	docs := map[string]string{}
	for _, pkg := range pkgs {
		dir := filepath.Join(src, strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/"))
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("read the sources of %s: %w", pkg, err)
		}
		fset := token.NewFileSet()
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
			if err != nil {
				return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, e.Name()), err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return false
				}
				for _, f := range st.Fields.List {
					text := f.Doc.Text()
					if text == "" {
						text = f.Comment.Text()
					}
					for _, name := range f.Names {
						if text != "" {
							docs[pkg+"."+ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(text), " ")
						}
					}
				}
				return false
			})
		}
	}
	return docs, nil
}

// keyItems turns keys into the tagged paragraphs of a page: the key
// with its type and default, then its meaning. Keys of lists' entries
// go into a subsection per list, after the file's own keys, with what
// the docs say of the list. missing are the keys nothing describes:
// neither a row, nor a Go comment, nor their list's text.
func keyItems(keys []configKey, docs docSection, godoc map[string]string) (top []manpage.Item, lists []manpage.Section, missing []string) {
	byList := map[string][]manpage.Item{}
	var order []string
	for _, k := range keys {
		row, ok := docs.rows[k.Path]
		switch {
		case ok:
		case len(docs.prose[k.List]) > 0:
			// A list the docs describe in prose (qos[]): the
			// subsection quotes it.
			row = docRow{Type: typeName(k.Type), Meaning: "See above."}
		default:
			row = docRow{Type: typeName(k.Type), Meaning: godoc[k.Owner.PkgPath()+"."+k.Owner.Name()+"."+k.Field]}
			if k.Default != "" {
				row.Default = "`" + k.Default + "`"
			}
		}
		if row.Meaning == "" {
			missing = append(missing, k.Path)
			row.Meaning = "(Not described yet.)"
		}
		name := strings.TrimPrefix(k.Path, k.List+".")
		tag := "`" + name + "` (" + row.Type
		if d := row.Default; d != "" && d != "—" {
			tag += "; default " + d
		}
		tag += ")"
		it := manpage.Item{Tag: tag, Text: mdLink.ReplaceAllString(row.Meaning, "$1 (docs/$2)")}
		if k.List == "" {
			top = append(top, it)
			continue
		}
		if _, ok := byList[k.List]; !ok {
			order = append(order, k.List)
		}
		byList[k.List] = append(byList[k.List], it)
	}
	for _, l := range order {
		blocks := []manpage.Block{{Text: "The keys of each entry of `" + strings.TrimSuffix(l, "[]") + "`."}}
		for _, b := range docs.prose[l] {
			b.Text = mdLink.ReplaceAllString(b.Text, "$1 (docs/$2)")
			blocks = append(blocks, b)
		}
		lists = append(lists, manpage.Section{Title: l, Sub: true, Blocks: append(blocks, manpage.Block{Items: byList[l]})})
	}
	return top, lists, missing
}
