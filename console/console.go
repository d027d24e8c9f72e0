// Package console serves jobq's web console at /ui/ on the API listener:
// server-rendered html/template pages (queue overview, jobs, job detail,
// types and schedules) that call the same service code as the HTTP API.
// htmx (console/static/htmx.min.js, vendored from the npm registry at the
// version pinned in console/vendor/package-lock.json, `make vendor`) turns
// links and forms into in-page requests and refreshes the overview; every
// page also works without JavaScript. Assets are embedded: nothing is loaded
// from the internet.
//
// With bearer tokens configured the console asks for one on a login page
// and keeps it in an HttpOnly, SameSite=Strict cookie scoped to /ui/; an
// "Authorization: Bearer" header is accepted too. Cross-origin form posts are
// refused (net/http's CrossOriginProtection).
package console

import (
	"bytes"
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/auth"
	"github.com/jobq/jobq/service"
)

// Path is where the console is served; every console URL starts with it.
const Path = "/ui/"

// Defaults of Options.
const (
	RefreshIntervalDefault = 5 * time.Second // overview live refresh
	ActivityMinutesDefault = 5               // minutes of throughput and pickup latency on the overview
	PageSizeDefault        = 50              // jobs per page
	// SnapshotMaxAge is how long the overview's counts and activity are
	// reused: all browsers showing the overview of one replica cost one set
	// of its statements per SnapshotMaxAge at most.
	SnapshotMaxAge = 2 * time.Second
)

// CookieName is the session cookie holding the bearer token the login page
// accepted (HttpOnly, SameSite=Strict, Path=/ui/).
const CookieName = "jobq_console_token"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/htmx.min.js static/console.css
var staticFS embed.FS

// Options configures the console.
type Options struct {
	// Service and Ops are the same service objects the HTTP API calls. Required.
	Service *service.Service
	Ops     *service.Ops
	// AuthTokens are the API's bearer tokens; when non-empty every console
	// page asks for one (see package doc). Defaults to none: no login, so
	// keep the listener on loopback.
	AuthTokens []string
	// JobTypes are the registered job types, listed on the types page and in
	// the filters.
	JobTypes []string
	// Owner is this replica's id, marked in the replicas table ("" when it
	// runs no scheduler).
	Owner string
	// Lease is the lease length replicas use, to estimate each replica's last
	// heartbeat (lease_until − Lease). Defaults to scheduler.LeaseDefault (30s).
	Lease time.Duration
	// RefreshInterval is how often the overview refreshes itself. Defaults to
	// RefreshIntervalDefault (5s).
	RefreshInterval time.Duration
	// ActivityMinutes is how many minutes of throughput and pickup latency
	// the overview shows, 1–60. Defaults to ActivityMinutesDefault (5).
	ActivityMinutes int
	// Workers serves the workers page (nil: it lists none).
	Workers *service.Workers
	// RemoteTypes are the job types run by remote workers.
	RemoteTypes []string
	// Alerts serves the alerts page (nil: it lists none).
	Alerts Alerts
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Console is the /ui/ handler.
type Console struct {
	opts     Options
	log      *slog.Logger
	pages    map[string]*template.Template
	accepted func(string) bool // nil: no authentication
	mux      *http.ServeMux
	snapMu   sync.Mutex
	snap     *overviewSnapshot // the overview's last read, see snapshot
}

// New returns the console handler; mount it at Path.
func New(opts Options) (*Console, error) {
	if opts.Service == nil || opts.Ops == nil {
		return nil, fmt.Errorf("console: Service and Ops are required")
	}
	opts.Lease = cmp.Or(opts.Lease, 30*time.Second)
	opts.RefreshInterval = cmp.Or(opts.RefreshInterval, RefreshIntervalDefault)
	opts.ActivityMinutes = cmp.Or(opts.ActivityMinutes, ActivityMinutesDefault)
	if opts.ActivityMinutes < 1 || opts.ActivityMinutes > service.MaxActivityMinutes {
		return nil, fmt.Errorf("console: ActivityMinutes must be 1–%d, got %d", service.MaxActivityMinutes, opts.ActivityMinutes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Console{opts: opts, log: opts.Logger.With("component", "console"), pages: map[string]*template.Template{}}
	if len(opts.AuthTokens) > 0 {
		c.accepted = auth.TokenMatcher(opts.AuthTokens)
	}
	for _, page := range []string{"overview", "jobs", "job", "types", "workers", "workflows", "workflow", "periodic", "alerts", "login", "error"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.logout)
	mux.HandleFunc("GET /ui/{$}", c.auth(c.overview))
	mux.HandleFunc("GET /ui/jobs", c.auth(c.jobs))
	mux.HandleFunc("GET /ui/jobs/{id}", c.auth(c.job))
	mux.HandleFunc("POST /ui/jobs/{id}/cancel", c.auth(c.jobAction("cancel")))
	mux.HandleFunc("POST /ui/jobs/{id}/retry", c.auth(c.jobAction("retry")))
	mux.HandleFunc("GET /ui/types", c.auth(c.types))
	mux.HandleFunc("GET /ui/workers", c.auth(c.workers))
	mux.HandleFunc("GET /ui/alerts", c.auth(c.alerts))
	mux.HandleFunc("GET /ui/workflows", c.auth(c.workflows))
	mux.HandleFunc("GET /ui/workflows/{key}", c.auth(c.workflow))
	mux.HandleFunc("POST /ui/types/{job_type}/pause", c.auth(c.typePause(true)))
	mux.HandleFunc("POST /ui/types/{job_type}/resume", c.auth(c.typePause(false)))
	mux.HandleFunc("POST /ui/types/{job_type}/limit", c.auth(c.typeLimit))
	mux.HandleFunc("GET /ui/periodic/{name}", c.auth(c.periodic))
	mux.HandleFunc("POST /ui/periodic", c.auth(c.periodicAdd))
	mux.HandleFunc("POST /ui/periodic/{name}/delete", c.auth(c.periodicDelete))
	// A reload of a page an action answered (or a mistyped URL) gets a page,
	// never the mux's plain-text 404 or 405.
	mux.HandleFunc("GET /ui/jobs/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
	})
	mux.HandleFunc("/ui/", c.auth(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "Not found", "There is no console page at "+r.URL.Path+".")
	}))
	c.mux = mux
	return c, nil
}

// ServeHTTP serves the console. Cross-origin unsafe requests get 403; a
// panic in a handler becomes an error page, not a dropped connection.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c.log.Error("console: panic", "path", r.URL.Path, "panic", v)
			c.fail(w, r, http.StatusInternalServerError, "Internal error", "The console failed to build this page; the replica's log has the cause.")
		}
	}()
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
		return
	}
	csrf.Handler(c.mux).ServeHTTP(w, r)
}

var csrf = func() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	return p
}()

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// auth lets a request through when authentication is off or it carries an
// accepted token (cookie or bearer header); otherwise the login page answers.
func (c *Console) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.accepted == nil || c.authenticated(r) {
			next(w, r)
			return
		}
		nextURL := Path
		if r.Method == http.MethodGet {
			nextURL = r.URL.RequestURI()
		}
		if r.Header.Get("HX-Request") == "true" {
			// An in-page request (a refresh, a button) whose session ended:
			// load the login page in full.
			w.Header().Set("HX-Redirect", "/ui/login?next="+url.QueryEscape(nextURL))
		}
		c.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in", Data: loginData{Next: nextURL}})
	}
}

func (c *Console) authenticated(r *http.Request) bool {
	if tok, ok := auth.BearerToken(r.Header.Get("Authorization")); ok && c.accepted(tok) {
		return true
	}
	ck, err := r.Cookie(CookieName)
	return err == nil && ck.Value != "" && c.accepted(ck.Value)
}

type loginData struct {
	Next  string
	Error string
}

// safeNext keeps a post-login redirect inside the console.
func safeNext(next string) string {
	if strings.HasPrefix(next, Path) && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") {
		return next
	}
	return Path
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.accepted == nil || c.authenticated(r) {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	if c.accepted == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" || !c.accepted(tok) {
		msg := "This token is not accepted."
		if tok == "" {
			msg = "Enter one of the API's bearer tokens."
		}
		c.log.Warn("console: sign-in refused", "remote", r.RemoteAddr, "token_given", tok != "")
		c.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in", Data: loginData{Next: next, Error: msg}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: Path, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode})
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Redirect", next)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Path, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// page is what every template gets: the layout's fields and the page's Data.
type page struct {
	Title  string
	Nav    string // overview, jobs, types: the highlighted tab
	Answer *answer
	Auth   bool // show the sign-out button
	Data   any
}

// answer is the outcome of an action or the reason a page could not be
// built, shown in a box at the top of the page.
type answer struct {
	OK      bool
	Status  int    // the HTTP status the API gives for the same call
	Code    string // the API's error code, e.g. failed_precondition
	Message string
}

// StatusText is e.g. "409 Conflict".
func (a *answer) StatusText() string {
	return fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
}

// errAnswer maps a service error as the HTTP API does (service.ErrorFor).
// A missing job or schedule names what is missing.
func (c *Console) errAnswer(err error, notFound string) *answer {
	status, d := service.ErrorFor(err)
	switch status {
	case http.StatusNotFound:
		if notFound != "" {
			d.Message = notFound
		}
	case http.StatusServiceUnavailable:
		c.log.Warn("console: database unavailable", "err", err)
	case service.StatusClientClosedRequest:
		c.log.Debug("console: client disconnected before its answer", "err", err)
	case http.StatusInternalServerError:
		c.log.Error("console: internal error", "err", err)
	}
	return &answer{Status: status, Code: d.Code, Message: d.Message}
}

// render executes a page into a buffer and writes it with status; a
// template error becomes a plain error page (never half a page).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	p.Auth = c.accepted != nil && c.authenticated(r)
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, "<!doctype html><title>jobq console</title><h1>Internal error</h1><p>The page %s could not be rendered; the replica's log has the cause. <a href=\"/ui/\">Overview</a></p>", template.HTMLEscapeString(name))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("Vary", "HX-Request")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	c.render(w, r, status, "error", &page{Title: title, Answer: &answer{Status: status, Message: msg}})
}
