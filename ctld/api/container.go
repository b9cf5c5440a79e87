package api

import (
	"path"
	"strings"
)

// FeatureContainerd is the node feature a tided with a working
// containerd reports; a job with a container image is constrained to
// nodes that have it.
const FeatureContainerd = "containerd"

// ContainerMount is one --container-mounts entry: a host path bound into
// the job's container.
type ContainerMount struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only,omitempty"`
}

// String is the Pyxis spelling, SRC:DST[:ro].
func (m ContainerMount) String() string {
	s := m.Source + ":" + m.Destination
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// ParseContainerMounts parses Pyxis' --container-mounts syntax:
// SRC[:DST[:FLAGS]],… with FLAGS ro or rw (DST defaults to SRC). Both
// paths must be absolute, so that a mount never depends on the directory
// the node daemon runs in.
func ParseContainerMounts(s string) ([]ContainerMount, error) {
	var out []ContainerMount
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) > 3 {
			return nil, Invalid("invalid container mount %q: want SRC:DST[:ro]", item)
		}
		m := ContainerMount{Source: parts[0], Destination: parts[0]}
		if len(parts) > 1 && parts[1] != "" {
			m.Destination = parts[1]
		}
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				m.ReadOnly = true
			case "rw", "":
			default:
				return nil, Invalid("invalid container mount %q: flags must be ro or rw, not %q", item, parts[2])
			}
		}
		if err := m.Check(); err != nil {
			return nil, Invalid("invalid container mount %q: %v", item, err)
		}
		m.Source, m.Destination = path.Clean(m.Source), path.Clean(m.Destination)
		out = append(out, m)
	}
	return out, nil
}

// Check refuses a mount the node must not make, whoever sent it (the
// controller checks every submission's mounts with it, not only
// sbatch): source and destination absolute and clean, not over the
// container's root, no NUL or ':' (which String could not write back).
func (m ContainerMount) Check() error {
	switch {
	case !path.IsAbs(m.Source) || !path.IsAbs(m.Destination):
		return Invalid("source and destination must be absolute paths")
	case path.Clean(m.Destination) == "/":
		return Invalid("cannot mount over the container's root")
	case strings.ContainsAny(m.Source+m.Destination, "\x00:"):
		return Invalid("a mount path may not contain ':' or a NUL byte")
	}
	return nil
}

// NormalizeImage spells an image reference the way Docker and containerd
// store it: "tide-test/bb" is "docker.io/tide-test/bb:latest", "ubuntu"
// is "docker.io/library/ubuntu:latest". The same image submitted under
// either spelling must find the one imported on the node. The grammar is
// Docker's (distribution's reference package), written out here so that
// the CLI, which links this package, does not compile that package's
// regular expressions at every start.
func NormalizeImage(ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", Invalid("empty container image")
	}
	// Pyxis and enroot accept "registry#image"; Docker's form uses '/'.
	if reg, img, ok := strings.Cut(ref, "#"); ok && reg != "" && img != "" {
		ref = reg + "/" + img
	}
	bad := func(why string) (string, error) {
		return "", Invalid("invalid container image %q: %s", ref, why)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		algo, hex, ok := strings.Cut(digest, ":")
		if !ok || algo != "sha256" || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
			return bad("digest must be sha256: and 64 lower-case hex digits")
		}
	}
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
		if !validTag(tag) {
			return bad("invalid tag " + strconvQuote(tag))
		}
	}
	comps := strings.Split(name, "/")
	domain := "docker.io"
	if len(comps) > 1 && (strings.ContainsAny(comps[0], ".:") || comps[0] == "localhost") {
		domain, comps = comps[0], comps[1:]
		if !validDomain(domain) {
			return bad("invalid registry " + strconvQuote(domain))
		}
		if domain == "index.docker.io" {
			domain = "docker.io"
		}
	}
	for _, c := range comps {
		if c != strings.ToLower(c) {
			return bad("repository name must be lowercase")
		}
		if !validPathComponent(c) {
			return bad("invalid repository name component " + strconvQuote(c))
		}
	}
	if domain == "docker.io" && len(comps) == 1 {
		comps = append([]string{"library"}, comps...)
	}
	out := domain + "/" + strings.Join(comps, "/")
	switch {
	case hasDigest: // a digest names the image; a tag next to it is dropped, as Docker does
		out += "@" + digest
	case tag != "":
		out += ":" + tag
	default:
		out += ":latest"
	}
	return out, nil
}

func strconvQuote(s string) string { return "\"" + s + "\"" }

func isAlnumLower(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// validPathComponent: lower-case alphanumerics separated by '.', '_',
// '__' or runs of '-'.
func validPathComponent(c string) bool {
	if c == "" || !isAlnumLower(c[0]) || !isAlnumLower(c[len(c)-1]) {
		return false
	}
	for i := 1; i < len(c)-1; i++ {
		switch ch := c[i]; {
		case isAlnumLower(ch):
		case ch == '-':
		case ch == '.' || ch == '_':
			if !isAlnumLower(c[i-1]) && !(ch == '_' && c[i-1] == '_' && i >= 2 && isAlnumLower(c[i-2])) {
				return false
			}
			if ch == '.' && !isAlnumLower(c[i+1]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// validTag: a word character, then up to 127 word characters, '.' or '-'.
func validTag(t string) bool {
	if t == "" || len(t) > 128 || t[0] == '.' || t[0] == '-' {
		return false
	}
	for i := 0; i < len(t); i++ {
		ch := t[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '.' || ch == '-') {
			return false
		}
	}
	return true
}

// validDomain: host name labels (letters, digits, '-', '.') and an
// optional numeric port.
func validDomain(d string) bool {
	host, port, hasPort := strings.Cut(d, ":")
	if host == "" || hasPort && (port == "" || strings.Trim(port, "0123456789") != "") {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}
