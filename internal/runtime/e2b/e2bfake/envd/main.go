// Command envd is the envd stand-in the fake E2B (package fake beside it)
// runs inside each of its sandboxes, as E2B runs its own envd in every
// microVM: the Connect services process.Process and filesystem.Filesystem
// (handlers generated from the same protos as the runtime's clients) and
// the HTTP /files and /health of envd.yaml, on a unix socket the fake's
// sandbox proxy forwards to. It runs as root and runs processes as the
// user named by each request's basic authentication (default -user), with
// envd's environment (PATH, HOME, USER, LOGNAME) and home directory.
//
// Behaviour followed from envd (e2b-dev/infra packages/envd): a Start
// whose request carries Connect-Timeout-Ms kills its process when that
// passes; a process outlives its streams; Connect attaches to a running
// process by pid or tag and streams its output from then on; keepalive
// events every Keepalive-Ping-Interval seconds (default 90) on a silent
// stream; X-Access-Token is required when a token is set; POST /init
// sets the sandbox's environment variables, which every process gets
// before its own (the fake posts a create's envVars there, as E2B's
// orchestrator does).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/process/processconnect"
)

func main() {
	sock := flag.String("socket", "/run/e2bfake/envd.sock", "unix socket to serve on")
	tokenFile := flag.String("token-file", "", "file holding the access token (empty: no token required)")
	defUser := flag.String("user", "user", "default user")
	flag.Parse()
	token := ""
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			log.Fatalf("envd: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	_ = os.Remove(*sock)
	ln, err := net.Listen("unix", *sock)
	if err != nil {
		log.Fatalf("envd: %v", err)
	}
	_ = os.Chmod(*sock, 0o666)
	s := &server{token: token, defaultUser: *defUser, procs: newTable()}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processService{s}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s}))
	mux.HandleFunc("/files", s.files)
	mux.HandleFunc("/init", s.init)
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := &http.Server{Handler: s.auth(mux), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

type server struct {
	token       string
	defaultUser string
	procs       *table

	envMu   sync.Mutex
	envVars map[string]string // set by /init
}

// init serves POST /init (envd.yaml): the body's envVars are added to the
// sandbox's environment, as envd's PostInit stores them
// (packages/envd/internal/api/init.go of e2b-dev/infra); 204.
func (s *server) init(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	var body struct {
		EnvVars map[string]string `json:"envVars"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.envMu.Lock()
	if s.envVars == nil {
		s.envVars = map[string]string{}
	}
	for k, v := range body.EnvVars {
		s.envVars[k] = v
	}
	s.envMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// environment returns the variables /init set, as KEY=value sorted by key.
func (s *server) environment() []string {
	s.envMu.Lock()
	defer s.envMu.Unlock()
	out := make([]string, 0, len(s.envVars))
	for k, v := range s.envVars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

type userKey struct{}

// auth checks the access token (all but /health) and resolves the user.
func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && s.token != "" && r.Header.Get("X-Access-Token") != s.token {
			httpError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
			return
		}
		name := s.defaultUser
		if u, _, ok := r.BasicAuth(); ok && u != "" {
			name = u
		}
		if q := r.URL.Query().Get("username"); r.URL.Path == "/files" && q != "" {
			name = q
		}
		u, err := user.Lookup(name)
		if err != nil {
			httpError(w, http.StatusUnauthorized, fmt.Sprintf("error looking up user '%s': %v", name, err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func userOf(ctx context.Context) *user.User { return ctx.Value(userKey{}).(*user.User) }

func ids(u *user.User) (uint32, uint32) {
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(uid), uint32(gid)
}

// httpError answers envd's error body {"message","code"}.
func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"message":%s,"code":%d}`, strconv.Quote(msg), code)
}
