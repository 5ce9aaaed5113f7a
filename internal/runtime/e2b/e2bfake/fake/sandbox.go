package fake

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// E2B sandbox states (SandboxState).
const (
	stRunning = "running"
	stPaused  = "paused"
)

type sbox struct {
	id, template   string
	state          string
	metadata       map[string]string
	started, endAt time.Time
	autoPause      bool
	secure         bool
	public         bool
	internet       bool
	allowOut       []string
	denyOut        []string
	accessToken    string
	trafficToken   string
	container      string
	sockDir        string
	killed         bool
}

func (s *Server) detail(b *sbox) map[string]any {
	onTimeout := "kill"
	if b.autoPause {
		onTimeout = "pause"
	}
	network := map[string]any{"allowPublicTraffic": b.public}
	if len(b.allowOut) > 0 {
		network["allowOut"] = b.allowOut
	}
	if len(b.denyOut) > 0 {
		network["denyOut"] = b.denyOut
	}
	m := map[string]any{
		"templateID": b.template, "sandboxID": b.id, "clientID": "e2bfake", "startedAt": b.started.UTC().Format(time.RFC3339Nano),
		"endAt": b.endAt.UTC().Format(time.RFC3339Nano), "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 10240,
		"metadata": b.metadata, "state": b.state, "envdVersion": envdVersion, "domain": s.domain,
		"network": network, "lifecycle": map[string]any{"autoResume": false, "onTimeout": onTimeout},
		"allowInternetAccess": b.internet,
	}
	if b.secure {
		m["envdAccessToken"] = b.accessToken
	}
	return m
}

func (s *Server) listed(b *sbox) map[string]any {
	return map[string]any{
		"templateID": b.template, "sandboxID": b.id, "clientID": "e2bfake", "startedAt": b.started.UTC().Format(time.RFC3339Nano),
		"endAt": b.endAt.UTC().Format(time.RFC3339Nano), "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 10240,
		"metadata": b.metadata, "state": b.state, "envdVersion": envdVersion,
	}
}

func (s *Server) short(b *sbox) map[string]any {
	m := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "e2bfake", "envdVersion": envdVersion, "domain": s.domain}
	if b.secure {
		m["envdAccessToken"] = b.accessToken
	}
	if !b.public {
		m["trafficAccessToken"] = b.trafficToken
	}
	return m
}

// envdVersion is the envd version the fake reports.
const envdVersion = "0.2.0"

func (s *Server) handleAPI(c *call) {
	switch c.op {
	case "POST /sandboxes":
		s.create(c)
	case "GET /v2/sandboxes", "GET /sandboxes":
		s.list(c)
	case "GET /sandboxes/{sandboxID}":
		s.with(c, func(b *sbox) { c.json(http.StatusOK, s.detail(b)) })
	case "DELETE /sandboxes/{sandboxID}":
		s.with(c, func(b *sbox) {
			s.killLocked(b)
			c.w.WriteHeader(http.StatusNoContent)
		})
	case "POST /sandboxes/{sandboxID}/pause":
		s.with(c, func(b *sbox) {
			if b.state == stPaused {
				c.error(http.StatusConflict, "Sandbox "+b.id+" is already paused")
				return
			}
			if err := s.pauseLocked(b); err != nil {
				c.error(http.StatusInternalServerError, "pause: "+err.Error())
				return
			}
			c.w.WriteHeader(http.StatusNoContent)
		})
	case "POST /sandboxes/{sandboxID}/connect", "POST /sandboxes/{sandboxID}/resume":
		var body struct {
			Timeout *int32 `json:"timeout"`
		}
		if !c.decode(&body) {
			return
		}
		var timeout time.Duration
		if c.op == "POST /sandboxes/{sandboxID}/connect" {
			// PostSandboxesSandboxIDConnect: the timeout is required and at
			// most the team's MaxLengthHours (handlers/sandbox_connect.go:46-51).
			if body.Timeout != nil {
				timeout = time.Duration(*body.Timeout) * time.Second
			}
			if timeout > s.maxLength() {
				c.error(http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", s.maxHours()))
				return
			}
		} else {
			var msg string
			if timeout, msg = s.parseTimeout(body.Timeout); msg != "" {
				c.error(http.StatusBadRequest, msg)
				return
			}
		}
		s.with(c, func(b *sbox) {
			if b.state == stRunning {
				if c.op == "POST /sandboxes/{sandboxID}/resume" {
					c.error(http.StatusConflict, "Sandbox "+b.id+" is already running")
					return
				}
				// A running sandbox's TTL is only extended, within its max
				// instance length (sandbox_connect.go:67-73, KeepAliveFor with
				// allowShorter false).
				if status, msg := s.keepAliveLocked(b, timeout, false); status != 0 {
					c.error(status, msg)
					return
				}
				c.json(http.StatusOK, s.short(b))
				return
			}
			if !s.startAllowedLocked() {
				// A resume starts the sandbox again: the same reservation
				// as a create (create_instance.go:188-204).
				c.error(http.StatusTooManyRequests, concurrencyMessage(s.opts.MaxSandboxes))
				return
			}
			if err := s.eng.unpause(context.Background(), b.container); err != nil {
				c.error(http.StatusInternalServerError, "resume: "+err.Error())
				return
			}
			// A resume is a new instance: its start time, and an end within
			// the max instance length from it (handlers/sandbox.go:64,
			// sandbox/store.go:80-84).
			b.state, b.started = stRunning, time.Now()
			b.endAt = b.started.Add(min(timeout, s.maxLength()))
			c.json(http.StatusCreated, s.short(b))
		})
	case "POST /sandboxes/{sandboxID}/timeout", "POST /sandboxes/{sandboxID}/refreshes":
		var body struct {
			Timeout  *int32 `json:"timeout"`
			Duration *int   `json:"duration"`
		}
		if !c.decode(&body) {
			return
		}
		d, allowShorter := time.Duration(0), true
		if c.op == "POST /sandboxes/{sandboxID}/timeout" {
			// PostSandboxesSandboxIDTimeout: a negative timeout is 0, the TTL
			// set (or shortened) from now (handlers/sandbox_timeout.go:46-52).
			if body.Timeout != nil && *body.Timeout > 0 {
				d = time.Duration(*body.Timeout) * time.Second
			}
		} else {
			// PostSandboxesSandboxIDRefreshes: at least the default timeout,
			// only extended (handlers/sandbox_refresh.go:47-57).
			d, allowShorter = defaultTimeout, false
			if body.Duration != nil && time.Duration(*body.Duration)*time.Second > d {
				d = time.Duration(*body.Duration) * time.Second
			}
		}
		s.with(c, func(b *sbox) {
			if b.state != stRunning {
				// A paused sandbox is not in the orchestrator's store: 404
				// (orchestrator/keep_alive.go:52-53).
				c.error(http.StatusNotFound, notFoundMessage(b.id))
				return
			}
			if status, msg := s.keepAliveLocked(b, d, allowShorter); status != 0 {
				c.error(status, msg)
				return
			}
			c.w.WriteHeader(http.StatusNoContent)
		})
	default:
		s.Violation("the client called %s, which the fake does not implement", c.op)
		c.error(http.StatusInternalServerError, "e2bfake: "+c.op+" is not implemented")
	}
}

func (s *Server) with(c *call, fn func(*sbox)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.sandboxes[c.params["sandboxID"]]
	if b == nil || b.killed {
		c.error(http.StatusNotFound, notFoundMessage(c.params["sandboxID"]))
		return
	}
	fn(b)
}

// notFoundMessage is E2B's 404 about a sandbox (packages/api/internal/
// utils/messages.go:9-11 of e2b-dev/infra).
func notFoundMessage(id string) string {
	return fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", id)
}

// defaultTimeout is E2B's timeout of a sandbox whose create names none
// (SandboxTimeoutDefault, packages/api/internal/sandbox/sandboxtypes/
// states.go:102 of e2b-dev/infra).
const defaultTimeout = 15 * time.Second

// maxLength is the team's max instance length (Options.MaxInstanceLength).
func (s *Server) maxLength() time.Duration { return s.opts.MaxInstanceLength }

// maxHours is the team's MaxLengthHours as E2B's messages name it.
func (s *Server) maxHours() int64 { return int64(s.maxLength() / time.Hour) }

// parseTimeout validates a create's (or resume's) timeout as
// validateAndParseTimeout does (packages/api/internal/handlers/
// timeout_helper.go:18-39 of e2b-dev/infra): none is defaultTimeout, it must
// be positive and at most the max instance length; msg is the 400's.
func (s *Server) parseTimeout(raw *int32) (d time.Duration, msg string) {
	if raw == nil {
		return defaultTimeout, ""
	}
	if *raw <= 0 {
		return 0, "Timeout must be greater than 0"
	}
	d = time.Duration(*raw) * time.Second
	if d > s.maxLength() {
		return 0, fmt.Sprintf("Timeout cannot be greater than %d hours", s.maxHours())
	}
	return d, ""
}

// keepAliveLocked sets a running sandbox's end to d from now as E2B's
// KeepAliveFor does (packages/api/internal/orchestrator/keep_alive.go:19-44
// and 72-80 of e2b-dev/infra): silently shortened to what is left of its
// max instance length since its start (counted in Shortened), 400 "Max
// instance length exceeded" once that has passed, and, unless allowShorter,
// never brought earlier. It returns the refusal's status and message (0: done).
// Called with s.mu held.
func (s *Server) keepAliveLocked(b *sbox, d time.Duration, allowShorter bool) (int, string) {
	now := time.Now()
	left := s.maxLength() - now.Sub(b.started)
	if left < 0 {
		return http.StatusBadRequest, "Max instance length exceeded"
	}
	ttl := min(left, d)
	end := now.Add(ttl)
	if !allowShorter && end.Before(b.endAt) {
		return 0, ""
	}
	if ttl < d {
		s.shortened++
	}
	b.endAt = end
	return 0, ""
}

// Shortened counts the timeouts the fake set shorter than asked because
// they reached past a sandbox's max instance length (E2B shortens them
// without a word; a client that knows the cap never asks for that).
func (s *Server) Shortened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shortened
}

// AutoPauses counts the sandboxes paused because their timeout passed
// (their end time, which the max instance length bounds).
func (s *Server) AutoPauses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.autoPauses
}

type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int32            `json:"timeout"`
	AutoPause           *bool             `json:"autoPause"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Network             *struct {
		AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
		AllowOut           []string `json:"allowOut"`
		DenyOut            []string `json:"denyOut"`
	} `json:"network"`
}

func (s *Server) create(c *call) {
	var req newSandbox
	if !c.decode(&req) {
		return
	}
	// An unknown template is 404 "template 'x' not found", x the reference
	// without its tag: PostSandboxes resolves the alias first
	// (packages/api/internal/handlers/sandbox_create.go:87-103 of
	// e2b-dev/infra), whose miss is templateNotFoundError
	// (packages/api/internal/cache/templates/alias_cache.go:112-113),
	// answered by ToAPIError (errors.go:59-69).
	if name, _, _ := strings.Cut(req.TemplateID, ":"); !slices.Contains(s.opts.Templates, name) {
		c.error(http.StatusNotFound, "template '"+name+"' not found")
		return
	}
	timeout, msg := s.parseTimeout(req.Timeout) // sandbox_create.go:158-163
	if msg != "" {
		c.error(http.StatusBadRequest, msg)
		return
	}
	b := &sbox{id: newSandboxID(), template: req.TemplateID, state: stRunning, metadata: req.Metadata, started: time.Now(),
		accessToken: "ea_" + randHex(16), trafficToken: "ta_" + randHex(16), public: true, internet: true}
	if b.metadata == nil {
		b.metadata = map[string]string{}
	}
	// The end: the timeout from the start, within the max instance length
	// (sandbox/store.go:80-84).
	b.endAt = b.started.Add(min(timeout, s.maxLength()))
	b.autoPause = req.AutoPause != nil && *req.AutoPause
	b.secure = req.Secure != nil && *req.Secure
	if req.AllowInternetAccess != nil {
		b.internet = *req.AllowInternetAccess
	}
	if n := req.Network; n != nil {
		if n.AllowPublicTraffic != nil {
			b.public = *n.AllowPublicTraffic
		}
		b.allowOut, b.denyOut = n.AllowOut, n.DenyOut
	}
	// Egress: all or nothing here (the fake does not filter by destination):
	// denied when internet access is off or 0.0.0.0/0 is denied.
	egress := b.internet && !slices.Contains(b.denyOut, "0.0.0.0/0")
	s.mu.Lock()
	if !s.startAllowedLocked() {
		s.mu.Unlock()
		c.error(http.StatusTooManyRequests, concurrencyMessage(s.opts.MaxSandboxes))
		return
	}
	s.starting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.starting--
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(c.r.Context(), 60*time.Second)
	defer cancel()
	token := ""
	if b.secure {
		token = b.accessToken
	}
	cid, dir, err := s.eng.create(ctx, s.tmp, b.id, req.EnvVars, egress, token)
	if err != nil {
		c.error(http.StatusInternalServerError, "create: "+err.Error())
		return
	}
	b.container, b.sockDir = cid, dir
	s.mu.Lock()
	s.sandboxes[b.id] = b
	s.mu.Unlock()
	c.json(http.StatusCreated, s.short(b))
}

func (s *Server) list(c *call) {
	q := c.r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		c.error(http.StatusBadRequest, "invalid metadata query")
		return
	}
	states := []string{stRunning}
	if c.op == "GET /v2/sandboxes" {
		states = []string{stRunning, stPaused}
		if v := q.Get("state"); v != "" {
			states = strings.Split(v, ",")
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	offset := 0
	if v := q.Get("nextToken"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	s.mu.Lock()
	var items []map[string]any
	for _, id := range sortedKeys(s.sandboxes) {
		b := s.sandboxes[id]
		if b.killed || !slices.Contains(states, b.state) {
			continue
		}
		ok := true
		for k, vs := range want {
			if b.metadata[k] != vs[0] {
				ok = false
			}
		}
		if ok {
			items = append(items, s.listed(b))
		}
	}
	s.mu.Unlock()
	page := []map[string]any{}
	if offset < len(items) {
		page = items[offset:min(offset+limit, len(items))]
	}
	if c.op == "GET /v2/sandboxes" && offset+limit < len(items) {
		c.w.Header().Set("X-Next-Token", strconv.Itoa(offset+limit))
	}
	c.json(http.StatusOK, page)
}

// startAllowedLocked tells whether one more sandbox may start: E2B
// reserves a place among the team's concurrent sandboxes (the running ones
// and those starting) for every create and resume, and refuses it beyond
// SandboxConcurrency (packages/api/internal/orchestrator/
// create_instance.go:188-204 of e2b-dev/infra; Options.MaxSandboxes).
// Called with s.mu held.
func (s *Server) startAllowedLocked() bool {
	if s.opts.MaxSandboxes <= 0 {
		return true
	}
	n := s.starting
	for _, b := range s.sandboxes {
		if !b.killed && b.state == stRunning {
			n++
		}
	}
	return n < s.opts.MaxSandboxes
}

// pauseLocked freezes a running sandbox (docker pause keeps its memory and
// processes, like E2B's memory snapshot). Called with s.mu held.
func (s *Server) pauseLocked(b *sbox) error {
	if err := s.eng.pause(context.Background(), b.container); err != nil {
		return err
	}
	b.state = stPaused
	return nil
}

// killLocked removes a sandbox. Called with s.mu held.
func (s *Server) killLocked(b *sbox) {
	b.killed = true
	delete(s.sandboxes, b.id)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.eng.Remove(ctx, b.container); err != nil {
			s.log.Warn("e2bfake: remove a container", "sandbox", b.id, "error", err)
		}
		forgetSocket(filepath.Join(b.sockDir, "envd.sock"))
	}()
}

// Kill deletes a sandbox behind the client's back (as when it is killed
// from E2B's dashboard); false when there is no such sandbox.
func (s *Server) Kill(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.sandboxes[id]
	if b == nil {
		return false
	}
	s.killLocked(b)
	return true
}

// Expire makes a sandbox's timeout pass now: paused when it was created
// with autoPause, killed otherwise; false when there is no such sandbox.
func (s *Server) Expire(id string) bool {
	s.mu.Lock()
	b := s.sandboxes[id]
	if b != nil {
		b.endAt = time.Now().Add(-time.Millisecond)
	}
	s.mu.Unlock()
	if b == nil {
		return false
	}
	s.expire()
	return true
}

// State returns a sandbox's state ("running", "paused", "" when it does not exist).
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		return b.state
	}
	return ""
}

// SandboxIDs lists the sandboxes that exist (running and paused).
func (s *Server) SandboxIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.sandboxes)
}

// SandboxEnv returns the environment a sandbox's envd and processes start
// from (the container's), nil when there is no such sandbox.
func (s *Server) SandboxEnv(id string) []string {
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, _ := s.eng.env(ctx, b.container)
	return env
}

// expire pauses or kills the sandboxes whose timeout passed.
func (s *Server) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, b := range s.sandboxes {
		if b.state != stRunning || now.Before(b.endAt) {
			continue
		}
		if b.autoPause && !s.opts.KillOnTimeout {
			if err := s.pauseLocked(b); err != nil {
				s.log.Warn("e2bfake: auto-pause", "sandbox", b.id, "error", err)
			}
			s.autoPauses++
			continue
		}
		s.killLocked(b)
	}
}

func (s *Server) lifecycleLoop(stop <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.expire()
		}
	}
}

// SandboxNetwork is the egress configuration a sandbox was created with:
// its allowOut and denyOut lists and allow_internet_access (for tests that
// check what an adapter asked for).
type SandboxNetwork struct {
	AllowOut, DenyOut []string
	Internet          bool
}

// Network returns sandbox id's egress configuration (false when there is
// no such sandbox).
func (s *Server) Network(id string) (SandboxNetwork, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.sandboxes[id]
	if b == nil {
		return SandboxNetwork{}, false
	}
	return SandboxNetwork{AllowOut: slices.Clone(b.allowOut), DenyOut: slices.Clone(b.denyOut), Internet: b.internet}, true
}
