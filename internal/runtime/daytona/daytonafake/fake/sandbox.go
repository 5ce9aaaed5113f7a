package fake

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Daytona sandbox states used here (the SandboxState enum).
const (
	stCreating   = "creating"
	stStarted    = "started"
	stStopping   = "stopping"
	stStopped    = "stopped"
	stStarting   = "starting"
	stArchiving  = "archiving"
	stArchived   = "archived"
	stRestoring  = "restoring"
	stDestroying = "destroying"
	stDestroyed  = "destroyed"
	stError      = "error"
)

type sbox struct {
	id, name, org  string
	state, desired string
	errorReason    string
	labels, env    map[string]string
	snapshot       string
	target         string
	user           string
	cpu, mem, disk int
	autoStop       int // minutes, 0 = off
	autoArchive    int // minutes
	autoDelete     int // minutes, <0 off
	blockAll       bool
	allowList      string
	domainList     string
	public         bool
	container      string
	shell          string // the toolbox's shell (toolboxShell; "" until asked)
	created        time.Time
	updated        time.Time
	lastActivity   time.Time
	stoppedAt      time.Time
}

func (s *Server) dto(b *sbox) map[string]any {
	labels := b.labels
	if labels == nil {
		labels = map[string]string{}
	}
	env := b.env
	if env == nil {
		env = map[string]string{}
	}
	m := map[string]any{
		"id": b.id, "organizationId": b.org, "name": b.name, "snapshot": b.snapshot, "user": b.user,
		"env": env, "labels": labels, "public": b.public, "networkBlockAll": b.blockAll,
		"target": b.target, "cpu": b.cpu, "gpu": 0, "memory": b.mem, "disk": b.disk,
		"state": b.state, "desiredState": b.desired, "backupState": "None",
		"autoStopInterval": b.autoStop, "autoArchiveInterval": b.autoArchive, "autoDeleteInterval": b.autoDelete,
		"volumes": []any{}, "createdAt": b.created.UTC().Format(time.RFC3339Nano), "updatedAt": b.updated.UTC().Format(time.RFC3339Nano),
		"lastActivityAt": b.lastActivity.UTC().Format(time.RFC3339Nano), "sandboxClass": "container",
		"daemonVersion": "0.190.0", "runnerId": "daytonafake", "toolboxProxyUrl": s.baseURL + "/toolbox",
		"recoverable": b.state == stError,
	}
	if b.allowList != "" {
		m["networkAllowList"] = b.allowList
	}
	if b.domainList != "" {
		m["domainAllowList"] = b.domainList
	}
	if b.errorReason != "" {
		m["errorReason"] = b.errorReason
	}
	return m
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// find returns the sandbox with that id or name (not destroyed). Called with s.mu held.
func (s *Server) find(idOrName string) *sbox {
	if b, ok := s.sandboxes[idOrName]; ok && b.state != stDestroyed {
		return b
	}
	for _, b := range s.sandboxes {
		if b.name == idOrName && b.state != stDestroyed {
			return b
		}
	}
	return nil
}

func (s *Server) handleAPI(c *call) {
	switch c.op {
	case "createSandbox":
		s.createSandbox(c)
	case "listSandboxes":
		s.listSandboxes(c)
	case "getSandbox":
		s.withSandbox(c, func(b *sbox) { c.json(http.StatusOK, s.dto(b)) })
	case "deleteSandbox":
		s.withSandbox(c, func(b *sbox) {
			if b.state == stDestroying {
				c.json(http.StatusOK, s.dto(b))
				return
			}
			b.state, b.desired, b.updated = stDestroying, stDestroyed, time.Now()
			dto := s.dto(b)
			go s.destroy(b)
			c.json(http.StatusOK, dto)
		})
	case "startSandbox":
		s.withSandbox(c, func(b *sbox) {
			switch b.state {
			case stStarted, stStarting, stRestoring:
			case stError:
				// SandboxService.start → assertSandboxNotErrored, a SandboxError
				// (400): apps/api/src/sandbox/services/sandbox.service.ts:164-168
				// and 2060, apps/api/src/exceptions/sandbox-error.exception.ts
				// (daytonaio/daytona v0.190.0); an errored sandbox is recovered.
				c.error(http.StatusBadRequest, "Sandbox is in an errored state")
				return
			case stStopped, stArchived:
				// The quotas again: a started sandbox consumes compute
				// (sandbox.service.ts:2092-2103).
				if msg := s.quotaLocked(b, b); msg != "" {
					c.error(http.StatusBadRequest, msg)
					return
				}
				s.startLocked(b)
			default:
				c.error(http.StatusConflict, "Sandbox state change in progress")
				return
			}
			b.lastActivity = time.Now()
			c.json(http.StatusOK, s.dto(b))
		})
	case "recoverSandbox":
		// SandboxService.recover (sandbox.service.ts:2242-2281, v0.190.0):
		// 400 unless recoverable, 400 unless in error; recovered in place
		// (error → stopped → started, left stopped with skipStart).
		s.withSandbox(c, func(b *sbox) {
			if b.state != stError { // the fake's recoverable: see dto
				c.error(http.StatusBadRequest, "Sandbox is not in a recoverable state")
				return
			}
			b.state, b.errorReason, b.updated = stStopped, "", time.Now()
			if c.r.URL.Query().Get("skipStart") != "true" {
				s.startLocked(b)
			}
			c.json(http.StatusOK, s.dto(b))
		})
	case "stopSandbox":
		s.withSandbox(c, func(b *sbox) {
			switch b.state {
			case stStopped, stStopping, stArchived:
			case stError:
				// SandboxService.stop → assertSandboxNotErrored
				// (sandbox.service.ts:2154, v0.190.0).
				c.error(http.StatusBadRequest, "Sandbox is in an errored state")
				return
			case stStarted:
				s.stopLocked(b)
			default:
				c.error(http.StatusConflict, "Sandbox state change in progress")
				return
			}
			c.json(http.StatusOK, s.dto(b))
		})
	case "archiveSandbox":
		s.withSandbox(c, func(b *sbox) {
			switch b.state {
			case stArchived, stArchiving:
			case stStopped:
				s.archiveLocked(b)
			default:
				c.error(http.StatusBadRequest, "Sandbox is not stopped")
				return
			}
			c.json(http.StatusOK, s.dto(b))
		})
	case "getPortPreviewUrl", "getSignedPortPreviewUrl":
		s.withSandbox(c, func(b *sbox) {
			port, err := strconv.Atoi(c.params["port"])
			if err != nil || port < 1 || port > 65535 {
				c.error(http.StatusBadRequest, "Invalid port")
				return
			}
			if b.state != stStarted {
				c.error(http.StatusBadRequest, "Sandbox is not running")
				return
			}
			host := strings.TrimPrefix(s.baseURL, "http://")
			if c.op == "getPortPreviewUrl" {
				c.json(http.StatusOK, map[string]any{"sandboxId": b.id, "url": "http://" + strconv.Itoa(port) + "-" + b.id + ".preview." + host, "token": "pv_" + randHex(12)})
				return
			}
			token := randHex(10)
			c.json(http.StatusOK, map[string]any{"sandboxId": b.id, "port": port, "token": token, "url": "http://" + strconv.Itoa(port) + "-" + token + ".preview." + host})
		})
	default:
		s.Violation("the adapter called %s, which the fake does not implement", c.op)
		c.error(http.StatusNotImplemented, "daytonafake: "+c.op+" is not implemented")
	}
}

func (s *Server) withSandbox(c *call, fn func(*sbox)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(c.params["sandboxIdOrName"])
	if b == nil {
		c.error(http.StatusNotFound, "Sandbox with ID or name "+c.params["sandboxIdOrName"]+" not found")
		return
	}
	b.lastActivity = time.Now()
	fn(b)
}

type createRequest struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList"`
	DomainAllowList     string            `json:"domainAllowList"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	GPUType             []string          `json:"gpuType"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	BuildInfo           *struct {
		DockerfileContent string `json:"dockerfileContent"`
	} `json:"buildInfo"`
}

// createSandbox answers createSandbox: the sandbox is recorded as creating
// and its container made in the background (provision).
func (s *Server) createSandbox(c *call) {
	var req createRequest
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil {
		c.error(http.StatusBadRequest, "invalid body: "+err.Error())
		return
	}
	if req.Name != "" && !nameRE.MatchString(req.Name) {
		c.error(http.StatusBadRequest, "Invalid sandbox name")
		return
	}
	if msg := checkCreate(req); msg != "" {
		c.error(http.StatusBadRequest, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Name != "" && s.find(req.Name) != nil {
		c.error(http.StatusConflict, "Sandbox with name "+req.Name+" already exists")
		return
	}
	disk := req.Disk
	if disk <= 0 {
		disk = DefaultDiskGiB
	}
	id := randUUID()
	b := newSandbox(req, id, disk, time.Now())
	if msg := s.quotaLocked(nil, b); msg != "" {
		c.error(http.StatusBadRequest, msg)
		return
	}
	s.sandboxes[id] = b
	dto := s.dto(b)
	spec := containerSpec{name: "daytonafake-" + s.eng.ID + "-" + id[:8], env: req.Env, network: networkMode(req), cpu: float64(b.cpu), memoryGB: int64(b.mem)}
	spec.env = mergeEnv(req.Env, map[string]string{"DAYTONA_SANDBOX_ID": id, "DAYTONA_SANDBOX_USER": SandboxUser})
	go s.provision(b, spec)
	c.json(http.StatusOK, dto)
}

// checkCreate applies Daytona's rules on a create body that no OpenAPI
// document encodes, with the server's messages ("" = accepted):
//
//   - the source: a build info and a snapshot are exclusive, and a sandbox
//     made from a snapshot (named or Daytona's default: no build info) takes
//     no cpu, gpu, memory or disk (each refused when non-zero, as
//     JavaScript's truthiness has it) nor a gpuType — apps/api/src/sandbox/
//     controllers/sandbox.controller.ts, createSandbox, lines 284-302 of
//     daytonaio/daytona v0.190.0 ("Cannot specify Sandbox resources when
//     using a snapshot", line 296).
func checkCreate(req createRequest) string {
	if req.BuildInfo != nil {
		if req.Snapshot != "" {
			return "Cannot specify a snapshot when using a build info entry"
		}
		return ""
	}
	if req.CPU != 0 || req.GPU != 0 || req.Memory != 0 || req.Disk != 0 {
		return "Cannot specify Sandbox resources when using a snapshot"
	}
	if len(req.GPUType) > 0 {
		return "Cannot specify GPU type when creating sandbox from snapshot. GPU type is inherited from snapshot."
	}
	return checkAllowLists(req)
}

// checkAllowLists applies Daytona's validation of the network lists of a
// create (SandboxService.resolveNetworkAllowList and resolveDomainAllowList,
// apps/api/src/sandbox/services/sandbox.service.ts:3312-3330, calling
// apps/api/src/sandbox/utils/network-validation.util.ts of daytonaio/daytona
// v0.190.0): networkAllowList holds IPv4 CIDRs only (lines 20-33), at most
// 10 (lines 35-37); domainAllowList holds host names, optionally "*."
// prefixed (lines 48-57), at most 10 (lines 59-61); each refused 400 with
// the validator's message.
func checkAllowLists(req createRequest) string {
	if req.NetworkAllowList != "" {
		networks := strings.Split(req.NetworkAllowList, ",")
		for _, n := range networks {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			parts := strings.Split(n, "/") // const [ipAddress, prefixLength] = network.split('/')
			ip, prefix := parts[0], ""
			if len(parts) > 1 {
				prefix = parts[1]
			}
			if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
				return `Invalid IP address: "` + ip + `" in network "` + n + `". Must be a valid IPv4 address`
			}
			if prefix == "" {
				return `Invalid network format: "` + n + `". Missing CIDR prefix length (e.g., /24)`
			}
			if bits, ok := parseIntJS(prefix); ok && (bits < 0 || bits > 32) {
				return "Invalid CIDR prefix length: " + n + ". Prefix must be between 0 and 32"
			}
		}
		if len(networks) > 10 {
			return "Network allow list cannot contain more than 10 networks"
		}
	}
	if req.DomainAllowList != "" {
		domains := strings.Split(req.DomainAllowList, ",")
		for _, d := range domains {
			d = strings.TrimSpace(d)
			if d != "" && !domainRE.MatchString(d) {
				return `Invalid domain: "` + d + `". Must be a valid domain name`
			}
		}
		if len(domains) > 10 {
			return "Domain allow list cannot contain more than 10 domains"
		}
	}
	return ""
}

// domainRE is network-validation.util.ts's domainRegex (line 49).
var domainRE = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$`)

// parseIntJS is JavaScript's parseInt(s, 10) on the leading digits of s
// (false: NaN, which passes Daytona's range check).
func parseIntJS(s string) (int, bool) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	n, digits := 0, 0
	for ; digits < len(s) && s[digits] >= '0' && s[digits] <= '9' && n < 1<<20; digits++ {
		n = n*10 + int(s[digits]-'0')
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// newSandbox returns the record of a created sandbox with Daytona's
// defaults: named by its id, target "us", the default snapshot unless
// built, at least 1 CPU and 1 GiB, auto-stop 15 min, auto-archive 7 days
// (a non-positive interval keeps it), auto-delete off, unless req says.
func newSandbox(req createRequest, id string, disk int, now time.Time) *sbox {
	b := &sbox{
		id: id, name: req.Name, org: "org-daytonafake", state: stCreating, desired: stStarted,
		labels: req.Labels, env: req.Env, snapshot: req.Snapshot, target: req.Target, user: SandboxUser,
		cpu: max(req.CPU, 1), mem: max(req.Memory, 1), disk: disk, autoStop: 15, autoArchive: 7 * 24 * 60, autoDelete: -1,
		blockAll: req.NetworkBlockAll, allowList: req.NetworkAllowList, domainList: req.DomainAllowList, public: req.Public,
		created: now, updated: now, lastActivity: now,
	}
	if b.name == "" {
		b.name = id
	}
	if b.target == "" {
		b.target = "us"
	}
	if b.snapshot == "" && req.BuildInfo == nil {
		b.snapshot = "daytonaio/sandbox:0.190.0"
	}
	if req.AutoStopInterval != nil {
		b.autoStop = *req.AutoStopInterval
	}
	if req.AutoArchiveInterval != nil && *req.AutoArchiveInterval > 0 {
		b.autoArchive = *req.AutoArchiveInterval
	}
	if req.AutoDeleteInterval != nil {
		b.autoDelete = *req.AutoDeleteInterval
	}
	return b
}

// networkMode is the container network of a created sandbox: "none" when
// all traffic is blocked, "limited" (the internal network: the fake does
// not filter by destination, so an allow-list means no way off the
// machine) with an allow-list, else "bridge".
func networkMode(req createRequest) string {
	switch {
	case req.NetworkBlockAll:
		return "none"
	case req.NetworkAllowList != "" || req.DomainAllowList != "":
		return "limited"
	}
	return "bridge"
}

// provision makes the container of sandbox b after Options.TransitionDelay
// and marks b started (or error); a sandbox destroyed meanwhile gets its
// container removed instead.
func (s *Server) provision(b *sbox, spec containerSpec) {
	time.Sleep(s.opts.TransitionDelay)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cid, err := s.eng.create(ctx, spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.state == stDestroying || b.state == stDestroyed {
		if cid != "" {
			go s.eng.Remove(context.Background(), cid)
		}
		return
	}
	b.updated = time.Now()
	if err != nil {
		b.state, b.errorReason = stError, "failed to create the sandbox: "+err.Error()
		return
	}
	b.container, b.state, b.lastActivity = cid, stStarted, time.Now()
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func randUUID() string {
	h := randHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (s *Server) listSandboxes(c *call) {
	q := c.r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			c.error(http.StatusBadRequest, "labels must be a JSON object")
			return
		}
	}
	states := map[string]bool{}
	for _, st := range q["states"] {
		states[st] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []any{}
	for _, id := range sortedKeys(s.sandboxes) {
		b := s.sandboxes[id]
		if b.state == stDestroyed {
			continue
		}
		if len(states) > 0 && !states[b.state] {
			continue
		}
		match := true
		for k, v := range want {
			if b.labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		d := s.dto(b)
		for _, k := range []string{"env", "networkBlockAll", "networkAllowList", "volumes", "backupCreatedAt", "buildInfo"} {
			delete(d, k) // SandboxListItem has none of these
		}
		items = append(items, d)
	}
	c.json(http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
}

// Transitions (called with s.mu held; they finish in the background).

func (s *Server) startLocked(b *sbox) {
	from := b.state
	if from == stArchived {
		b.state = stRestoring
	} else {
		b.state = stStarting
	}
	b.desired, b.updated, b.errorReason = stStarted, time.Now(), ""
	delay := s.opts.TransitionDelay
	if from == stArchived {
		delay *= 4
	}
	go func() {
		time.Sleep(delay)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.mu.Lock()
		cid := b.container
		s.mu.Unlock()
		err := s.eng.start(ctx, cid)
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.state != stStarting && b.state != stRestoring {
			return
		}
		b.updated = time.Now()
		if err != nil {
			b.state, b.errorReason = stError, "failed to start: "+err.Error()
			return
		}
		b.state, b.lastActivity = stStarted, time.Now()
	}()
}

func (s *Server) stopLocked(b *sbox) {
	b.state, b.desired, b.updated = stStopping, stStopped, time.Now()
	cid := b.container
	go func() {
		time.Sleep(s.opts.TransitionDelay)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := s.eng.stop(ctx, cid)
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.state != stStopping {
			return
		}
		b.updated = time.Now()
		if err != nil {
			b.state, b.errorReason = stError, "failed to stop: "+err.Error()
			return
		}
		b.state, b.stoppedAt = stStopped, time.Now()
	}()
}

func (s *Server) archiveLocked(b *sbox) {
	b.state, b.desired, b.updated = stArchiving, stArchived, time.Now()
	go func() {
		time.Sleep(s.opts.TransitionDelay)
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.state == stArchiving {
			b.state, b.updated = stArchived, time.Now()
		}
	}()
}

func (s *Server) destroy(b *sbox) {
	time.Sleep(s.opts.TransitionDelay)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.mu.Lock()
	cid := b.container
	s.mu.Unlock()
	if cid != "" {
		_ = s.eng.Remove(ctx, cid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.state, b.updated = stDestroyed, time.Now()
	delete(s.sandboxes, b.id)
}

// lifecycleLoop applies auto-stop and auto-archive.
func (s *Server) lifecycleLoop(stop <-chan struct{}) {
	t := time.NewTicker(max(s.opts.Minute/20, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		for _, b := range s.sandboxes {
			switch {
			case b.state == stStarted && b.autoStop > 0 && now.Sub(b.lastActivity) >= time.Duration(b.autoStop)*s.opts.Minute:
				s.stopLocked(b)
			case b.state == stStopped && b.autoArchive > 0 && now.Sub(b.stoppedAt) >= time.Duration(b.autoArchive)*s.opts.Minute:
				s.archiveLocked(b)
			case b.state == stStopped && b.autoDelete == 0:
				b.state = stDestroying
				go s.destroy(b)
			}
		}
		s.mu.Unlock()
	}
}

// DeleteOutOfBand deletes a sandbox (by id or name) behind the adapter's
// back, as the dashboard, another client or an expiry would. It reports
// whether such a sandbox existed.
func (s *Server) DeleteOutOfBand(idOrName string) bool {
	s.mu.Lock()
	b := s.find(idOrName)
	if b == nil {
		s.mu.Unlock()
		return false
	}
	b.state = stDestroying
	s.mu.Unlock()
	s.destroy(b)
	return true
}

// SetState forces a sandbox into a state out of band ("stopped",
// "archived", "error": an expiry, an auto-archive, a runner failure).
func (s *Server) SetState(idOrName, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(idOrName)
	if b == nil {
		return false
	}
	switch state {
	case stStopped:
		if b.state == stStarted {
			s.stopLocked(b)
		}
	case stArchived:
		if b.state == stStarted {
			cid := b.container
			b.state = stArchiving
			go func() {
				_ = s.eng.stop(context.Background(), cid)
				s.mu.Lock()
				b.state, b.stoppedAt, b.updated = stArchived, time.Now(), time.Now()
				s.mu.Unlock()
			}()
		} else if b.state == stStopped {
			s.archiveLocked(b)
		}
	case stError:
		b.state, b.errorReason = stError, "runner unreachable"
	}
	return true
}

// SandboxState returns the state and labels of a sandbox ("" when none).
func (s *Server) SandboxState(idOrName string) (string, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(idOrName)
	if b == nil {
		return "", nil
	}
	return b.state, b.labels
}

// SandboxEnv returns the environment a sandbox was created with.
func (s *Server) SandboxEnv(idOrName string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.find(idOrName); b != nil {
		return mergeEnv(b.env, nil)
	}
	return nil
}

// Exec runs argv in a sandbox's container as its user (for tests that look
// inside a sandbox behind the adapter's back).
func (s *Server) Exec(ctx context.Context, idOrName string, argv ...string) (stdout, stderr []byte, code int, err error) {
	s.mu.Lock()
	b := s.find(idOrName)
	cid := ""
	if b != nil {
		cid = b.container
	}
	s.mu.Unlock()
	if cid == "" {
		return nil, nil, 0, errNoFile
	}
	res, err := s.eng.exec(ctx, cid, execSpec{cmd: argv})
	return res.stdout, res.stderr, res.code, err
}

// SandboxNetwork is the network configuration a sandbox was created with
// (for tests that check what an adapter asked for).
type SandboxNetwork struct {
	BlockAll                          bool
	NetworkAllowList, DomainAllowList string
}

// Network returns a sandbox's network configuration (false when there is
// no such sandbox).
func (s *Server) Network(idOrName string) (SandboxNetwork, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(idOrName)
	if b == nil {
		return SandboxNetwork{}, false
	}
	return SandboxNetwork{BlockAll: b.blockAll, NetworkAllowList: b.allowList, DomainAllowList: b.domainList}, true
}
