package opts

import (
	"fmt"
	"strings"
)

// magic starts a directive line.
const magic = "#SBATCH"

// word is one token of a directive, with the script line it came from.
type word struct {
	text string
	line int
}

// checkScript applies sbatch's checks on the batch script body; each
// returned line is one "sbatch: error:" line.
func checkScript(body string) []string {
	switch {
	case body == "":
		return []string{"Batch script is empty!"}
	case strings.TrimSpace(body) == "":
		return []string{"Batch script contains only whitespace!"}
	case !strings.HasPrefix(body, "#!"):
		return []string{
			"This does not look like a batch script.  The first",
			"line must start with #! followed by the path to an interpreter.",
			"For instance: #!/bin/sh",
		}
	case strings.Contains(body, "\r\n"):
		return []string{
			"Batch script contains DOS line breaks (\\r\\n)",
			"instead of expected UNIX line breaks (\\n).",
		}
	case strings.ContainsRune(body, 0):
		return []string{"The Slurm controller does not allow scripts that contain a NULL character '\\0'."}
	}
	return nil
}

// directiveWords returns the words of the script's #SBATCH lines. Like
// sbatch it reads from the top until the first line that is neither
// blank nor a comment; the #! line is a comment. Words are split as a
// shell splits them: quotes group, a backslash escapes the next
// character, and an unquoted '#' starts a comment that ends the line.
func directiveWords(name, body string) ([]word, error) {
	var out []word
	for i, line := range strings.Split(body, "\n") {
		lineno := i + 1
		if rest, ok := strings.CutPrefix(line, magic); ok && (rest == "" || isSpace(rest[0])) {
			ws, err := splitDirective(rest)
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %w in [%s]", name, lineno, err, line)
			}
			if len(ws) > 0 && (ws[0] == "hetjob" || ws[0] == "packjob") {
				return nil, errorf("%s: line %d: heterogeneous jobs (#SBATCH %s) are not supported yet", name, lineno, ws[0])
			}
			for _, w := range ws {
				out = append(out, word{text: w, line: lineno})
			}
			continue
		}
		t := strings.TrimLeft(line, " \t\r\v\f")
		if t == "" || t[0] == '#' {
			continue
		}
		break
	}
	return out, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n'
}

// splitDirective splits the text after "#SBATCH" into words.
func splitDirective(s string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inWord  bool
		quote   byte
		escaped bool
	)
	flush := func() {
		if inWord {
			out = append(out, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
			cur.WriteByte(c)
			inWord = true
		case c == '\\':
			escaped = true
			inWord = true
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
			inWord = true
		case c == '#':
			flush()
			return out, nil
		case isSpace(c):
			flush()
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errorf("Unmatched `%c`", quote)
	}
	flush()
	return out, nil
}

// wrapScript is the script sbatch builds for --wrap.
func wrapScript(cmd string) string {
	return "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + cmd + "\n"
}
