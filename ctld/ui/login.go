package ui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// How a browser signs in on api_addr: the user pastes a token from
// `tide token` (or opens a link whose fragment carries one,
// /ui/login#token=..., which the script submits: a fragment never
// reaches the server, its logs or a proxy's), the controller checks it
// as it checks a Bearer token, and puts it in an HttpOnly cookie bound
// to /ui/ that expires with the token. The cookie is taken only for
// reading pages under /ui/ (GET and HEAD, ctld's uiGate): it cannot
// submit, cancel or change anything, so a page of another site that
// makes the browser send it achieves nothing (and SameSite=Strict
// keeps it from being sent at all).

// maxTokenForm bounds the login form's token (a JWT of Tide's is a few
// hundred bytes).
const maxTokenForm = 8 << 10

// loginView is the login page's data.
type loginView struct {
	// Socket: the caller is on the unix socket and needs no token.
	Socket bool
	// User is who the cookie names, when it is valid.
	User    string
	Expires string
	Next    string
	Error   string
}

func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	v := loginView{Next: safeNext(r.URL.Query().Get("next"))}
	if why := r.URL.Query().Get("why"); why != "" {
		v.Error = clip(why, 200)
	}
	who := h.src.Identity(r)
	if who.Known && who.Method == MethodSocket {
		if err := checkHost(who, r); err != nil {
			h.fail(w, r, err)
			return
		}
		v.Socket, v.User = true, who.User
	} else if c, err := r.Cookie(CookieName); err == nil {
		if user, exp, err := h.src.CheckToken(c.Value); err == nil {
			v.User, v.Expires = user, exp.Local().Format("2006-01-02 15:04")
		}
	}
	h.loginPage(w, r, v, http.StatusOK)
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request, v loginView, status int) {
	d := pageData{Title: "Sign in", Who: h.src.Identity(r), View: v}
	if d.Who.Known {
		d.Cluster = h.src.Cluster(r)
	}
	h.write(w, r, h.pages["login"], d, status)
}

// serveLoginPost checks the token and sets the cookie.
func (h *Handler) serveLoginPost(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		h.fail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, api.Invalid("login form: %v", err))
		return
	}
	next := safeNext(r.PostFormValue("next"))
	tok := strings.TrimSpace(r.PostFormValue("token"))
	// `tide token` prints TIDE_JWT=<token>; take the line as printed.
	tok = strings.TrimSpace(strings.TrimPrefix(tok, "TIDE_JWT="))
	v := loginView{Next: next}
	if tok == "" {
		v.Error = "paste the token that `tide token` prints"
		h.loginPage(w, r, v, http.StatusBadRequest)
		return
	}
	_, exp, err := h.src.CheckToken(tok)
	if err != nil {
		v.Error = clip(err.Error(), 300)
		h.loginPage(w, r, v, http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: Prefix, Expires: exp,
		MaxAge: max(int(time.Until(exp)/time.Second), 1), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// serveLogout clears the cookie. The token itself stays valid until it
// expires (tokens are not revocable one by one: docs/operations.md).
func (h *Handler) serveLogout(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// sameOrigin refuses a form posted from another site (login CSRF: a
// page signing the victim in as the attacker). Browsers say where a
// request comes from in Sec-Fetch-Site, or at least Origin; a client
// that sends neither is no browser acting for someone else. Origin
// "null" is an opaque origin (a sandboxed frame, a data: or file:
// page): never the dashboard's own form, whose pages' Referrer-Policy
// (same-origin) lets the browser send their origin; it counts only
// when Sec-Fetch-Site, which a browser that sends it sets right, is
// missing.
func sameOrigin(r *http.Request) error {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" && site != "none" {
		return api.Errorf(api.ErrPermissionDenied, "refused a form sent from another site (Sec-Fetch-Site: %s)", clip(site, 40))
	}
	if o := r.Header.Get("Origin"); o == "null" && site == "" {
		return api.Errorf(api.ErrPermissionDenied, "refused a form sent from an opaque origin (Origin: null)")
	} else if o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return api.Errorf(api.ErrPermissionDenied, "refused a form sent from another site (Origin: %s)", clip(o, 100))
		}
	}
	return nil
}

// safeNext keeps a page to return to after signing in only when it is
// a dashboard path of this host (never another site: an open redirect
// would lend the controller's name to phishing links).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, Prefix+"login") {
		return Prefix
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// clip cuts s to at most n bytes (at a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
