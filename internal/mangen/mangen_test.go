package mangen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tide-hpc/tide/cli/manpage"
	"github.com/tide-hpc/tide/cli/root"
	"github.com/tide-hpc/tide/cli/sim"
	"github.com/tide-hpc/tide/ctld"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/noded"
)

// repoRoot is the repository's root: the folder above that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

var (
	built     sync.Once
	builtErr  error
	roffPages map[string]string // "sbatch.1" → roff
)

// rendered returns every page as roff, by file name.
func rendered(t *testing.T) map[string]string {
	t.Helper()
	built.Do(func() {
		src := repoRoot(t)
		pages, err := Pages(src)
		if err != nil {
			builtErr = err
			return
		}
		roffPages = map[string]string{}
		for _, p := range pages {
			var b bytes.Buffer
			if err := manpage.Write(&b, p); err != nil {
				builtErr = err
				return
			}
			roffPages[fmt.Sprintf("%s.%d", p.Name, p.Section)] = b.String()
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return roffPages
}

// helpOption finds the options --help and --usage list.
var helpOption = regexp.MustCompile(`(?m)(?:^\s*(?:-\S(?:, | or ))?|\[)(--[A-Za-z0-9][A-Za-z0-9_-]*)`)

var (
	longTag  = regexp.MustCompile(`\\-\\-([A-Za-z0-9](?:[A-Za-z0-9_]|\\-)*)`)
	shortTag = regexp.MustCompile(`\\fB\\-([A-Za-z0-9])\\fR`)
	alsoNote = regexp.MustCompile(`Also written (.*?)\.( |$)`)
)

// listedOptions returns the option names a piece of roff lists: the terms of
// its tagged paragraphs (the line after .TP) and the spellings named in
// their "Also written" notes ("--users", "-u").
func listedOptions(roff string) map[string]bool {
	names := map[string]bool{}
	add := func(s string) {
		for _, m := range longTag.FindAllStringSubmatch(s, -1) {
			names["--"+strings.ReplaceAll(m[1], `\-`, "-")] = true
		}
		for _, m := range shortTag.FindAllStringSubmatch(s, -1) {
			names["-"+m[1]] = true
		}
	}
	lines := strings.Split(roff, "\n")
	for i, l := range lines {
		if l == ".TP" && i+2 < len(lines) {
			add(lines[i+1])
			if m := alsoNote.FindStringSubmatch(lines[i+2]); m != nil {
				add(m[1])
			}
		}
	}
	return names
}

// section returns the part of a page under a heading (".SH OPTIONS",
// ".SS tided image pull", written plainly).
func section(t *testing.T, roff, heading string) string {
	t.Helper()
	req, title, _ := strings.Cut(heading, " ")
	title = strings.ReplaceAll(title, "-", `\-`)
	i, n := -1, 0
	for _, h := range []string{req + " " + title, req + ` "` + title + `"`} {
		if i = strings.Index(roff, h+"\n"); i >= 0 {
			n = len(h) + 1
			break
		}
	}
	if i < 0 {
		t.Fatalf("no %s", heading)
	}
	rest := roff[i+n:]
	// A section ends at the next section, a subsection at the next
	// heading of either kind.
	end := `(?m)^\.SH `
	if req == ".SS" {
		end = `(?m)^\.S[HS] `
	}
	if j := regexp.MustCompile(end).FindStringIndex(rest); j != nil {
		rest = rest[:j[0]]
	}
	return rest
}

// TestSlurmPagesListEveryOption fails when an option of a Slurm-named
// command's parser is missing from its page: every entry of the table
// the parser reads (hidden spellings too), and, read independently of
// that table's description, every option the command's own --help and
// --usage print.
func TestSlurmPagesListEveryOption(t *testing.T) {
	pages := rendered(t)
	for _, c := range slurmCommands() {
		t.Run(c.name, func(t *testing.T) {
			roff, ok := pages[c.name+".1"]
			if !ok {
				t.Fatalf("no page %s.1", c.name)
			}
			have := listedOptions(section(t, roff, ".SH OPTIONS"))
			for _, o := range c.options() {
				if o.Long != "" && !have["--"+o.Long] {
					t.Errorf("%s's parser takes --%s; its page does not list it", c.name, o.Long)
				}
				if o.Short != 0 && !have["-"+string(o.Short)] {
					t.Errorf("%s's parser takes -%c; its page does not list it", c.name, o.Short)
				}
			}
			for _, flag := range []string{"--help", "--usage"} {
				out, err := run([]string{c.name, flag})
				if err != nil {
					t.Fatal(err)
				}
				// The options a line starts with ("  -p, --partition=",
				// "     -a or --all:") or a usage bracket opens
				// ("[--account=name]"); not those a description names.
				for _, m := range helpOption.FindAllStringSubmatch(out, -1) {
					if !have[m[1]] {
						t.Errorf("%s %s prints %s; the page does not list it", c.name, flag, m[1])
					}
				}
			}
		})
	}
}

// TestCobraPagesListEveryFlag: every flag of every command the daemons
// and tide's own subcommands run is in the page, in the command's
// section.
func TestCobraPagesListEveryFlag(t *testing.T) {
	pages := rendered(t)
	f, _, _ := factory()
	check := func(t *testing.T, roff string, cmd *cobra.Command, heading string) {
		have := listedOptions(section(t, roff, heading))
		cmd.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Hidden {
				return
			}
			if !have["--"+fl.Name] {
				t.Errorf("%s takes --%s; %s does not list it", cmd.CommandPath(), fl.Name, heading)
			}
			if fl.Shorthand != "" && !have["-"+fl.Shorthand] {
				t.Errorf("%s takes -%s; %s does not list it", cmd.CommandPath(), fl.Shorthand, heading)
			}
		})
	}
	var walk func(t *testing.T, roff string, cmd *cobra.Command)
	walk = func(t *testing.T, roff string, cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			check(t, roff, sub, ".SS "+sub.CommandPath())
			walk(t, roff, sub)
		}
	}
	for _, tt := range []struct {
		page string
		cmd  *cobra.Command
	}{
		{page: "tidectld.8", cmd: ctld.NewCommand()},
		{page: "tided.8", cmd: noded.NewCommand()},
	} {
		t.Run(tt.page, func(t *testing.T) {
			tt.cmd.InitDefaultHelpFlag()
			check(t, pages[tt.page], tt.cmd, ".SH OPTIONS")
			walk(t, pages[tt.page], tt.cmd)
		})
	}
	t.Run("tide.1", func(t *testing.T) {
		roff := pages["tide.1"]
		holder := &cobra.Command{Use: "tide"}
		for _, s := range root.Subcommands() {
			if s.Slurm == "" && s.Name != "sim" && s.Name != "image" {
				holder.AddCommand(s.New(f))
			}
		}
		walk(t, roff, holder)
		simCmd := sim.NewCmd(f)
		check(t, roff, simCmd, ".SS TIDE SIM")
		simRoot := &cobra.Command{Use: "tide"}
		simRoot.AddCommand(simCmd)
		for _, sub := range simCmd.Commands() {
			check(t, roff, sub, ".SS "+sub.CommandPath())
		}
		for _, s := range root.Subcommands() {
			if !strings.Contains(roff, `\fBtide `+strings.ReplaceAll(s.Name, "-", `\-`)+`\fR`) {
				t.Errorf("tide.1 does not list tide %s", s.Name)
			}
		}
	})
}

// keyPaths walks a configuration type's mapstructure tags on its own:
// the keys the loader accepts, by the list they belong to ("" for the
// file's own).
func keyPaths(t reflect.Type, prefix, list string, out map[string][]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out[list] = append(out[list], prefix+name)
		switch {
		case ft.Kind() == reflect.Struct && readByKeys(ft):
			out[list] = out[list][:len(out[list])-1]
			keyPaths(ft, prefix+name+".", list, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && readByKeys(ft.Elem()):
			keyPaths(ft.Elem(), "", prefix+name+"[]", out)
		}
	}
}

func readByKeys(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("mapstructure") != "" {
			return true
		}
	}
	return false
}

// TestConfigPagesListEveryKey fails when a key the loaders accept is
// missing from tide.yaml(5) or tided(8), or has no description there
// (neither a row in docs/configuration.md nor a Go comment).
func TestConfigPagesListEveryKey(t *testing.T) {
	pages := rendered(t)
	for _, tt := range []struct {
		page, heading, docs string
		def                 any
	}{
		{page: "tide.yaml.5", heading: ".SH KEYS", docs: "## Controller: `tide.yaml`", def: config.Default()},
		{page: "tided.8", heading: ".SH CONFIGURATION", docs: "## Node: `tided.yaml`", def: noded.DefaultConfig()},
	} {
		t.Run(tt.page, func(t *testing.T) {
			keys := map[string][]string{}
			keyPaths(reflect.TypeOf(tt.def), "", "", keys)
			if len(keys[""]) < 10 {
				t.Fatalf("only %d keys found: %v", len(keys[""]), keys[""])
			}
			for list, paths := range keys {
				heading := tt.heading
				if list != "" {
					heading = ".SS " + list
				}
				sec := section(t, pages[tt.page], heading)
				for _, p := range paths {
					if !strings.Contains(sec, ".TP\n\\fB"+strings.ReplaceAll(p, "-", `\-`)+"\\fR (") {
						t.Errorf("%s: key %s of %s is not listed", tt.page, p, cmpList(list))
					}
				}
			}
			src := repoRoot(t)
			md, err := os.ReadFile(filepath.Join(src, "docs", "configuration.md"))
			if err != nil {
				t.Fatal(err)
			}
			all := configKeys(tt.def)
			godoc, err := goDocs(src, module, keyPackages(all))
			if err != nil {
				t.Fatal(err)
			}
			docs := readDocs(string(md), tt.docs)
			if _, _, missing := keyItems(all, docs, godoc); len(missing) > 0 {
				t.Errorf("%s: keys without a description (a row in docs/configuration.md or a Go comment): %v", tt.page, missing)
			}
			for k := range docs.rows {
				if !slices.ContainsFunc(all, func(c configKey) bool { return c.Path == k }) {
					t.Logf("docs/configuration.md documents %s, which the loader does not take", k)
				}
			}
		})
	}
}

func cmpList(list string) string {
	if list == "" {
		return "the file"
	}
	return list
}

// macros are the requests the pages may use.
var macros = []string{".TH", ".SH", ".SS", ".TP", ".PP", ".RS", ".RE", ".nf", ".fi", ".br", ".nh", ".ad", `.\"`}

// TestPagesAreWellFormed checks every page's roff: the sections a page
// has, only known requests, ASCII only, fonts closed on their line; and,
// where groff is installed, that it renders the page without a warning.
func TestPagesAreWellFormed(t *testing.T) {
	pages := rendered(t)
	want := []string{"sbatch.1", "squeue.1", "scancel.1", "sinfo.1", "scontrol.1", "sacct.1", "srun.1", "salloc.1",
		"sprio.1", "sstat.1", "tide.1", "tidectld.8", "tided.8", "tide.yaml.5"}
	for _, name := range want {
		if _, ok := pages[name]; !ok {
			t.Errorf("no page %s", name)
		}
	}
	if len(pages) != len(want) {
		t.Errorf("%d pages, want %d", len(pages), len(want))
	}
	groff, _ := exec.LookPath("groff")
	dir := t.TempDir()
	for name, roff := range pages {
		t.Run(name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(roff, "\n"), "\n")
			if !strings.HasPrefix(lines[1], ".TH ") {
				t.Errorf("line 2 is %q, want .TH", lines[1])
			}
			sections := []string{".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", `.SH "SEE ALSO"`}
			if !strings.HasSuffix(name, ".5") {
				sections = append(sections, ".SH OPTIONS", `.SH "EXIT STATUS"`)
			}
			for _, s := range sections {
				if !slices.Contains(lines, s) {
					t.Errorf("no %s", s)
				}
			}
			for i, l := range lines {
				for _, r := range l {
					if r > 0x7e || (r < ' ' && r != '\t') {
						t.Errorf("line %d: character %U: %q", i+1, r, l)
						break
					}
				}
				if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
					req, _, _ := strings.Cut(l, " ")
					if !slices.Contains(macros, req) {
						t.Errorf("line %d: unexpected request %q", i+1, l)
					}
				}
				if opens := strings.Count(l, `\fB`) + strings.Count(l, `\fI`); strings.Count(l, `\fR`) < opens {
					t.Errorf("line %d: font left open: %q", i+1, l)
				}
				if l == ".TP" && (i+1 >= len(lines) || lines[i+1] == "" || strings.HasPrefix(lines[i+1], ".")) {
					t.Errorf("line %d: .TP without a tag", i+1)
				}
			}
			if groff == "" {
				t.Skip("groff is not installed: the rendering check is skipped")
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(roff), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", path).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("groff: %v\n%s", err, out)
			}
		})
	}
}

// TestGenerate writes the pages where man(1) looks for them.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	if code := Main([]string{"-dir", dir, "-src", repoRoot(t)}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, p := range []string{"man1/sbatch.1", "man1/tide.1", "man5/tide.yaml.5", "man8/tidectld.8", "man8/tided.8"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(".SH NAME\n")) {
			t.Errorf("%s has no NAME section", p)
		}
	}
	if code := Main([]string{"-dir", dir, "extra"}); code != 2 {
		t.Errorf("an operand: exit %d, want 2", code)
	}
	if code := Main([]string{"-dir", dir, "-src", t.TempDir()}); code != 1 {
		t.Errorf("a source without docs: exit %d, want 1", code)
	}
}
