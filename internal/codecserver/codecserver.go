// Package codecserver serves a payload codec over HTTP in the format of the
// Temporal Web UI's codec endpoint (and of the Temporal CLI's
// --codec-endpoint, and of the SDK's remote data converter): POST
// <endpoint>/encode and POST <endpoint>/decode with a JSON body
// {"payloads": [{"metadata": {…base64…}, "data": "…base64…"}]}, answered in
// the same form. Every request must be authenticated, by
// "Authorization: Bearer <token>" (the CLI's --codec-auth, tools) or by the
// session cookie a browser gets from <endpoint>/login once the operator has
// typed the token there (the UI sends cookies when its codec setting
// includeCredentials is on; it sends no bearer token of its own unless it is
// logged in through OIDC). CORS answers the UI's origins only
// (docs/SECURITY.md "The codec server").
package codecserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/cors"
	"go.temporal.io/sdk/converter"
)

// MinTokenLength is the shortest accepted token, in bytes.
const MinTokenLength = 32

// CookieName is the session cookie set by /login.
const CookieName = "sandboxcore_codec_session"

// Defaults.
const (
	DefaultMaxBodyBytes = 32 << 20
	DefaultSessionTTL   = 12 * time.Hour
)

// Options configure the handler.
type Options struct {
	// Codec encodes and decodes (required).
	Codec converter.PayloadCodec
	// Token every request must present (required, at least MinTokenLength
	// bytes).
	Token string
	// AllowedOrigins are the Web UI origins ("http://127.0.0.1:8233",
	// "https://temporal-ui.example.com") that may call the codec from a
	// browser; a request with any other Origin is refused. Empty: no browser
	// may (the CLI and tools send no Origin).
	AllowedOrigins []string
	// Secure marks the session cookie Secure and SameSite=None (serve the
	// codec over HTTPS: a UI on another site can then use it); otherwise the
	// cookie is SameSite=Strict and works when the UI and the codec server
	// share a host name.
	Secure bool
	// SessionTTL is how long a /login session lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives refused requests (never a token or a payload); nil
	// discards.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

type server struct {
	o     Options
	codec http.Handler
	token [32]byte // sha256 of the token
	mac   []byte   // session cookie key, derived from the token
}

// New returns the handler. Errors: no codec, or a token shorter than
// MinTokenLength.
func New(o Options) (http.Handler, error) {
	if o.Codec == nil {
		return nil, errors.New("codecserver: no codec")
	}
	if len(o.Token) < MinTokenLength {
		return nil, fmt.Errorf("codecserver: the token must be at least %d bytes (e.g. `openssl rand -hex 32`)", MinTokenLength)
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for i, origin := range o.AllowedOrigins {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("codecserver: allowed origin %q: want scheme://host[:port], such as http://127.0.0.1:8233", origin)
		}
		o.AllowedOrigins[i] = u.Scheme + "://" + u.Host
	}
	s := &server{o: o, codec: converter.NewPayloadCodecHTTPHandler(o.Codec), token: sha256.Sum256([]byte(o.Token))}
	m := hmac.New(sha256.New, []byte(o.Token))
	m.Write([]byte("sandboxcore codec session key"))
	s.mac = m.Sum(nil)
	c := cors.New(cors.Options{
		AllowedOrigins: o.AllowedOrigins,
		AllowedMethods: []string{http.MethodPost},
		// What the Web UI sends (ui-server v2.55.0 data-encoder): its JSON
		// body, the namespace, and with passAccessToken its OIDC tokens.
		AllowedHeaders:      []string{"Content-Type", "X-Namespace", "Authorization", "Authorization-Extras"},
		AllowCredentials:    true,
		AllowPrivateNetwork: true,
		MaxAge:              600,
	})
	return c.Handler(s), nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(s.o.AllowedOrigins, origin) && !s.sameOrigin(r, origin) {
		s.refuse(w, r, http.StatusForbidden, "origin "+strconv.Quote(origin)+" is not allowed (codec-server --allow-origin)")
		return
	}
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/login"):
		s.login(w, r)
	case strings.HasSuffix(p, "/encode"), strings.HasSuffix(p, "/decode"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if !s.authenticated(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxcore codec"`)
			s.refuse(w, r, http.StatusUnauthorized, "no valid bearer token or session (log in at "+strings.TrimSuffix(strings.TrimSuffix(p, "/encode"), "/decode")+"/login)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
		s.codec.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// sameOrigin: the login form posts back to the codec server itself.
func (s *server) sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.HasSuffix(r.URL.Path, "/login") && u.Host == r.Host
}

func (s *server) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	s.o.Logger.Info("codec server refused a request", "status", code, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", why)
	http.Error(w, why, code)
}

func (s *server) tokenMatches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

func (s *server) authenticated(r *http.Request) bool {
	// The bearer token, else the session cookie (a UI logged in through
	// OIDC with passAccessToken sends its own bearer token, which is not ours).
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && s.tokenMatches(strings.TrimSpace(tok)) {
			return true
		}
	}
	c, err := r.Cookie(CookieName)
	return err == nil && s.validSession(c.Value)
}

// session values are "<expiry unix seconds>.<base64url HMAC-SHA256 of it>",
// keyed by a key derived from the token: rotating the token ends every
// session, and the cookie never holds the token.
func (s *server) sessionValue(expiry int64) string {
	m := hmac.New(sha256.New, s.mac)
	m.Write([]byte(strconv.FormatInt(expiry, 10)))
	return strconv.FormatInt(expiry, 10) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *server) validSession(v string) bool {
	exp, _, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || s.o.Now().Unix() >= n {
		return false
	}
	return hmac.Equal([]byte(v), []byte(s.sessionValue(n)))
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>sandboxcore codec server</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>sandboxcore codec server</h1>
{{if .Done}}<p>Logged in until {{.Until}}. The Temporal Web UI can now decode payloads in this browser
(its codec endpoint must be this server, with "include cross-origin credentials" on). You may close this page.</p>
{{else}}{{if .Failed}}<p style="color: #b00">That is not the token.</p>{{end}}
<p>Type the codec server's token to let the Temporal Web UI decode payloads in this browser.</p>
<form method="post"><input type="password" name="token" size="48" autocomplete="off" autofocus required>
<button type="submit">Log in</button></form>{{end}}
</body></html>
`))

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	data := struct {
		Done, Failed bool
		Until        string
	}{}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if err := r.ParseForm(); err != nil || !s.tokenMatches(r.PostForm.Get("token")) {
			s.o.Logger.Info("codec server refused a login", "remote", r.RemoteAddr)
			w.WriteHeader(http.StatusUnauthorized)
			data.Failed = true
			break
		}
		until := s.o.Now().Add(s.o.SessionTTL)
		c := &http.Cookie{Name: CookieName, Value: s.sessionValue(until.Unix()), Path: "/", Expires: until,
			MaxAge: int(s.o.SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode}
		if s.o.Secure {
			c.Secure, c.SameSite = true, http.SameSiteNoneMode
		}
		http.SetCookie(w, c)
		data.Done, data.Until = true, until.UTC().Format(time.RFC3339)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, data)
}

// Server is a codec server listening in the background.
type Server struct {
	// URL is the codec endpoint ("http://127.0.0.1:8234"), what the Web UI's
	// codec setting and the Temporal CLI's --codec-endpoint take.
	URL  string
	srv  *http.Server
	done chan error
}

// Start listens on addr (host:port; port 0 picks one) and serves h, over
// HTTPS when tlsConf is set. Errors: the listener's.
func Start(addr string, h http.Handler, tlsConf *tls.Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codec server: listen on %s: %w", addr, err)
	}
	scheme := "http"
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
		scheme = "https"
	}
	s := &Server{
		URL:  scheme + "://" + ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Done is closed with the serving error when the server stops.
func (s *Server) Done() <-chan error { return s.done }

// Close stops the server, waiting up to 5 s for requests in flight.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
