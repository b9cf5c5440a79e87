package ui

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"hash/fnv"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// CookieName is the cookie that carries a browser's token on api_addr
// (set by the login page, HttpOnly, SameSite=Strict, Path=/ui/).
const CookieName = "tide_ui"

// PollInterval is how often pages refresh their main part.
const PollInterval = 5 * time.Second

// pollHeader marks the script's refreshes, which want a status (401)
// rather than a redirect to the login page when the session ended.
const pollHeader = "X-Tide-UI"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the dashboard. It is safe for concurrent use.
type Handler struct {
	src   Source
	mux   *http.ServeMux
	pages map[string]*template.Template
	// static serves the embedded CSS, script and icon.
	static http.Handler
	// poll is PollInterval (tests may shorten it).
	poll time.Duration
}

// New returns the dashboard over src. It panics if the embedded
// templates do not parse (a build error, caught by every test).
func New(src Source) *Handler {
	h := &Handler{src: src, mux: http.NewServeMux(), pages: map[string]*template.Template{}, poll: PollInterval}
	base := template.Must(template.New("layout.html").ParseFS(templateFS, "templates/layout.html"))
	for _, p := range []string{"map", "queue", "job", "queues", "login", "error"} {
		h.pages[p] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+p+".html"))
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	h.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	h.mux.HandleFunc("GET /ui/{$}", h.serveMap)
	h.mux.HandleFunc("GET /ui/queue", h.serveQueue)
	h.mux.HandleFunc("GET /ui/jobs", h.serveJobSearch)
	h.mux.HandleFunc("GET /ui/jobs/{id}", h.serveJob)
	h.mux.HandleFunc("GET /ui/queues", h.serveQueues)
	h.mux.HandleFunc("GET /ui/login", h.serveLogin)
	h.mux.HandleFunc("POST /ui/login", h.serveLoginPost)
	h.mux.HandleFunc("POST /ui/logout", h.serveLogout)
	h.mux.HandleFunc("GET /ui/static/{name}", h.serveStatic)
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, api.Errorf(api.ErrNotFound, "%s %s: no such page", r.Method, r.URL.Path))
	})
	return h
}

// Under reports whether path belongs to the dashboard.
func Under(path string) bool { return path == "/ui" || strings.HasPrefix(path, Prefix) }

// Public reports whether r may be answered without an identity: the
// login page, signing out (which only clears the cookie) and the
// static files (which hold no cluster data).
func Public(r *http.Request) bool {
	p := r.URL.Path
	return p == Prefix+"login" || p == Prefix+"logout" || strings.HasPrefix(p, Prefix+"static/")
}

// contentSecurityPolicy lets a page load only this origin's script,
// style and images and talk only to this origin: nothing a page does
// reaches another host, even if a job name smuggled markup past the
// escaping. No inline script or style is allowed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// ServeHTTP answers the dashboard's paths.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the page's own form posts, which sameOrigin
	// could then not tell from a sandboxed frame's. Other sites get no
	// Referer either way.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	// The files change only with the binary; an hour's caching spares
	// the refreshes nothing they need.
	w.Header().Set("Cache-Control", "public, max-age=3600")
	h.static.ServeHTTP(w, r)
}

// pageData is what the layout template renders.
type pageData struct {
	Title   string
	Cluster Cluster
	Who     Identity
	Nav     []navItem
	// Poll is the refresh interval in seconds (0: the page does not
	// refresh).
	Poll    int
	Updated string
	// Main is the page's main part, rendered first (its ETag is the
	// refreshes').
	Main template.HTML
	ETag string
	// View is the page's own data, for its main template.
	View any
}

type navItem struct {
	Label, Href string
	Active      bool
}

func navFor(active string) []navItem {
	items := []navItem{{"Cluster", Prefix, false}, {"Queue", Prefix + "queue", false}, {"Queues", Prefix + "queues", false}}
	for i := range items {
		items[i].Active = items[i].Label == active
	}
	return items
}

// request is one page request's context for the view builders.
type request struct {
	r   *http.Request
	who Identity
	cl  Cluster
}

// page renders one page: build makes its view; errors become an error
// page with the API's status for the error's class.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, name, nav string, build func(*request) (title string, view any, err error)) {
	who := h.src.Identity(r)
	if !who.Known {
		ToLogin(w, r, "")
		return
	}
	if err := checkHost(who, r); err != nil {
		h.fail(w, r, err)
		return
	}
	rq := &request{r: r, who: who, cl: h.src.Cluster(r)}
	title, view, err := build(rq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := pageData{Title: title, Cluster: rq.cl, Who: who, Nav: navFor(nav), Poll: int(h.poll / time.Second),
		Updated: rq.cl.Now.Local().Format("15:04:05"), View: view}
	h.write(w, r, h.pages[name], d, http.StatusOK)
}

// bufPool recycles the buffers pages render into.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// write renders d's main part, then the whole page, or with ?part=main
// the main part alone (the script's refreshes); it answers 304 when
// the refresh's If-None-Match names the same main part.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, t *template.Template, d pageData, status int) {
	main := bufPool.Get().(*bytes.Buffer)
	defer func() { main.Reset(); bufPool.Put(main) }()
	if err := t.ExecuteTemplate(main, "main", d); err != nil {
		http.Error(w, "tidectld: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	sum := fnv.New64a()
	sum.Write(main.Bytes())
	d.ETag = `"` + strconv.FormatUint(sum.Sum64(), 36) + `"`
	hd := w.Header()
	// Pages hold what one user may see: never kept by a cache.
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	body := main
	if r.URL.Query().Get("part") == "main" {
		hd.Set("ETag", d.ETag)
		if status == http.StatusOK && r.Header.Get("If-None-Match") == d.ETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	} else {
		d.Main = template.HTML(main.String())
		body = bufPool.Get().(*bytes.Buffer)
		defer func() { body.Reset(); bufPool.Put(body) }()
		if err := t.ExecuteTemplate(body, "page", d); err != nil {
			http.Error(w, "tidectld: render: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeBody(w, r, body.Bytes(), status)
}

// gzipMin is the smallest body worth compressing.
const gzipMin = 4 << 10

var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// writeBody sends b, gzipped when the client takes it and b is large:
// the cluster map of 1,000 nodes is about a megabyte of markup, a
// twentieth of it compressed, refreshed every few seconds.
func writeBody(w http.ResponseWriter, r *http.Request, b []byte, status int) {
	hd := w.Header()
	hd.Add("Vary", "Accept-Encoding")
	if len(b) < gzipMin || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		hd.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	hd.Set("Content-Encoding", "gzip")
	w.WriteHeader(status)
	zw := gzipPool.Get().(*gzip.Writer)
	zw.Reset(w)
	_, _ = zw.Write(b)
	_ = zw.Close()
	zw.Reset(nil)
	gzipPool.Put(zw)
}

// acceptsGzip reports whether an Accept-Encoding value takes gzip
// (and does not refuse it with q=0).
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// errorView is the error page's data.
type errorView struct {
	Status  int
	Class   string
	Message string
	Login   bool
}

// fail answers with an error page: the status and words of the error's
// class, as the API answers it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, class := api.HTTPStatus(err)
	who := h.src.Identity(r)
	d := pageData{Title: http.StatusText(status), Who: who, Nav: navFor(""),
		View: errorView{Status: status, Class: class, Message: err.Error(), Login: status == http.StatusUnauthorized}}
	if who.Known {
		d.Cluster = h.src.Cluster(r)
	}
	h.write(w, r, h.pages["error"], d, status)
}

// checkHost refuses a socket caller's request that names a host other
// than this machine's loopback. A browser reaches the socket only
// through a tunnel (ssh -L 8080:/run/tide/tidectld.sock), whose port any
// web page the user opens could also reach by DNS rebinding (a name of
// the attacker's that resolves to 127.0.0.1): such a request names the
// attacker's host and is refused. Over api_addr the cookie is bound
// to the controller's host name, so a rebound name carries none.
func checkHost(who Identity, r *http.Request) error {
	if who.Method != MethodSocket || r.Host == "" {
		return nil
	}
	if loopbackHost(r.Host) {
		return nil
	}
	return api.Errorf(api.ErrPermissionDenied,
		"the dashboard on the local socket answers only requests for localhost, not %q (see docs/operations.md, Dashboard)", r.Host)
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost (or a name under .localhost), 127.0.0.0/8 or
// ::1, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ToLogin sends a request that carries no valid credential to the
// login page (303, remembering the page asked for), or answers 401
// when it is a page refresh or not a page at all. why says what was
// wrong with the credential, "" when there was none.
func ToLogin(w http.ResponseWriter, r *http.Request, why string) {
	if r.Header.Get(pollHeader) != "" || r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, "tidectld: sign in again (", strings.TrimSpace(why), ")")
		return
	}
	target := Prefix + "login?next=" + urlQueryEscape(r.URL.RequestURI())
	if why != "" {
		target += "&why=" + urlQueryEscape(why)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// errBadParam is an invalid query value, named in the error page.
func errBadParam(name, value, want string) error {
	if len(value) > 64 {
		value = value[:64] + "…"
	}
	return api.Invalid("bad %s %q: %s", name, value, want)
}
