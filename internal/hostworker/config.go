// Package hostworker wires one sandboxcore worker host: configuration from the
// environment, the ports (store, repo cache, workspaces, runtime, credentials),
// the embedded Temporal dev server when TEMPORAL_ADDRESS is unset, search
// attribute registration, and the Temporal workers on the shared and the
// host-specific task queues.
package hostworker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/postgres"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Config is a worker host's configuration; README.md "Configuration" lists
// every variable with its default.
type Config struct {
	DataDir string // SANDBOX_DATA_DIR
	// TemporalAddress is the frontend (TEMPORAL_ADDRESS, else the Temporal
	// profile's address); "" embeds a dev server.
	TemporalAddress string
	// Namespace is TEMPORAL_NAMESPACE, else the profile's, else "default".
	Namespace       string
	TemporalPort    int    // SANDBOX_TEMPORAL_PORT (embedded server)
	UIPort          int    // SANDBOX_UI_PORT (embedded Web UI; 0 disables)
	TaskQueue       string // SANDBOX_TASK_QUEUE
	HostID          string // SANDBOX_HOST_ID
	RuntimeProvider string // SANDBOX_RUNTIME_PROVIDER: auto (default) or a kind of the runtime catalog (runtimes.go)
	RuntimeImage    string // SANDBOX_RUNTIME_IMAGE
	// SupervisorBinary is the sandbox-supervisor program the bubblewrap,
	// local and Docker runtimes run inside each runtime
	// (SANDBOX_SUPERVISOR_BINARY; "": next to the worker's executable, else
	// on PATH).
	SupervisorBinary string
	// RuntimeNetwork is the network policy of a workspace whose acquire
	// names none (SANDBOX_RUNTIME_NETWORK, default limited); NetworkMax the
	// widest one an acquire may ask for (SANDBOX_NETWORK_MAX, default the
	// wider of limited and RuntimeNetwork); NetworkAllow the worker's
	// allow-list of the limited network, canonical (SANDBOX_NETWORK_ALLOW,
	// default egress.DefaultAllow; set and empty: no entries of its own).
	// docs/SECURITY.md "Network modes".
	RuntimeNetwork sandboxapi.Network
	NetworkMax     sandboxapi.Network
	NetworkAllow   []string
	// RuntimeResources are the resource hints of every runtime
	// (SANDBOX_RUNTIME_CPUS in cores, SANDBOX_RUNTIME_MEMORY_MB in MiB,
	// SANDBOX_RUNTIME_PIDS in processes, SANDBOX_RUNTIME_DISK_GB in GiB);
	// nil when none is set. Docker enforces CPU, memory and pids, bubblewrap
	// those where a cgroup hierarchy is writable (both with a pids limit of
	// 4096 when none is set) and the disk quota always (10 GiB when none is
	// set); local enforces none (docs/SECURITY.md "Resource limits
	// (bubblewrap)").
	RuntimeResources *sandbox.ResourceHints
	// DiskVolumes is SANDBOX_DISK_VOLUMES: "off" (default), "auto" or "on".
	// With volumes, every new worktree and every bubblewrap runtime's /tmp
	// is a file system of its own of the disk quota's size, so that the
	// kernel keeps the quota (package volume; docs/SECURITY.md "Disk
	// volumes"). auto: when this host can (a root worker with loop
	// devices and mkfs.ext4), else off, logged; on: the worker refuses to
	// start without them.
	DiskVolumes string
	// SandboxUID and SandboxGID are the host user and group a root
	// worker's bubblewrap sandboxes run as (SANDBOX_RUNTIME_UID and
	// SANDBOX_RUNTIME_GID, default 65534 each: nobody and nogroup; never 0).
	// docs/SECURITY.md "What each runtime isolates".
	SandboxUID, SandboxGID uint32
	AllowFileURLs          bool          // SANDBOX_ALLOW_FILE_URLS
	AllowHTTPURLs          bool          // SANDBOX_ALLOW_HTTP_URLS
	FetchFreshness         time.Duration // SANDBOX_FETCH_FRESHNESS
	IdleStop               time.Duration // SANDBOX_IDLE_STOP
	// LockWait bounds a client's update's wait for its session's lock
	// (SANDBOX_LOCK_WAIT; 0: no bound).
	LockWait  time.Duration
	IdleClose time.Duration // SANDBOX_IDLE_CLOSE
	// ProcessMaxIdle: a live background process keeps its runtime from
	// hibernating this long after it was last started, read or written
	// (SANDBOX_PROCESS_MAX_IDLE; docs/API.md "Idle rules for processes").
	ProcessMaxIdle  time.Duration
	CredentialsFile string // SANDBOX_GIT_CREDENTIALS_FILE
	LogLevel        string // SANDBOX_LOG_LEVEL
	// SessionOnHostQueue: session runs move to their host's task queue after
	// acquire (SANDBOX_SESSION_ON_HOST_QUEUE; default on with the embedded
	// server, off with TEMPORAL_ADDRESS, where several hosts may share Temporal).
	SessionOnHostQueue bool
	// HostWait bounds how long an operation waits for its host (SANDBOX_HOST_WAIT).
	HostWait time.Duration
	// WorkflowCacheSize is how many workflow runs this process keeps in
	// memory between their workflow tasks (SANDBOX_WORKFLOW_CACHE_SIZE,
	// default DefaultWorkflowCacheSize): the SDK's sticky cache, shared by
	// every worker of the process, and with the embedded server also the
	// history service's cache of mutable states. A run not held is rebuilt
	// from its history by its next workflow task (docs/BENCHMARKS.md "Scale").
	WorkflowCacheSize int
	DatabaseURL       string // DATABASE_URL; "" = embedded SQLite store under DataDir
	// MetricsAddr is where Prometheus metrics are served (SANDBOX_METRICS_ADDR,
	// host:port; port 0 picks a free one); "" serves none.
	MetricsAddr string
	// Auth: credentials directory, GitHub API and App, access-check TTL (auth.go).
	Auth AuthConfig
	// Eviction: schedule, policy and disk budget (SANDBOX_EVICTION_*,
	// SANDBOX_DISK_BUDGET_*; eviction.go).
	Eviction EvictionConfig
	// Security: the Temporal connection (TLS, API key, profiles), the
	// embedded server's TLS, payload encryption and the UI's codec server
	// (security.go).
	Security SecurityConfig
	// E2B configures SANDBOX_RUNTIME_PROVIDER=e2b (E2B_*; e2b.go).
	E2B E2BConfig
	// Environment: the runtimes' PATH and dependency-cache scope
	// (SANDBOX_RUNTIME_PATH, SANDBOX_CACHE_SCOPE; environment.go).
	Environment EnvironmentConfig
	// Content: submodules and Git LFS (SANDBOX_SUBMODULES, SANDBOX_LFS*; content.go).
	Content ContentConfig
	// Daytona: the DAYTONA_* variables, read with
	// SANDBOX_RUNTIME_PROVIDER=daytona only (daytona.go).
	Daytona DaytonaConfig
}

// Defaults.
const (
	DefaultTemporalPort   = 7233
	DefaultUIPort         = 8233
	DefaultFetchFreshness = 30 * time.Second
	DefaultIdleStop       = 20 * time.Minute
	// DefaultLockWait is SANDBOX_LOCK_WAIT's default.
	DefaultLockWait  = 60 * time.Second
	DefaultIdleClose = 6 * time.Hour
	DefaultHostWait  = time.Minute
	// DefaultWorkflowCacheSize (workflow runs) bounds the memory of idle sessions: a cached
	// session run costs ≈ 120 KiB in the worker and ≈ 90 KiB in the embedded
	// server, so 10,000 open sessions stay within ≈ 2 GiB only when most of
	// them are not held (docs/BENCHMARKS.md "Scale").
	DefaultWorkflowCacheSize = 2000
	// MaxWorkflowCacheSize is the largest SANDBOX_WORKFLOW_CACHE_SIZE accepted
	// (workflow runs); a larger or non-positive one is a ConfigError.
	MaxWorkflowCacheSize = 1_000_000
)

// ConfigError names the variable that is wrong.
type ConfigError struct {
	Variable string
	Value    string
	Reason   string
}

// Error renders "configuration: VAR=\"value\": reason".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("configuration: %s=%q: %s", e.Variable, e.Value, e.Reason)
}

// ConfigFromEnv reads and validates the configuration. lookup is usually
// os.LookupEnv. Errors are *ConfigError naming the bad variable. Each step
// reads one area of README "Configuration", in this order (the first bad
// variable is the one reported).
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(name, def string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		return def
	}
	c := Config{
		TaskQueue:        get("SANDBOX_TASK_QUEUE", sandboxapi.DefaultTaskQueue),
		RuntimeProvider:  get("SANDBOX_RUNTIME_PROVIDER", autoProvider),
		RuntimeImage:     get("SANDBOX_RUNTIME_IMAGE", ""),
		SupervisorBinary: get("SANDBOX_SUPERVISOR_BINARY", ""),
		RuntimeNetwork:   sandboxapi.Network(get("SANDBOX_RUNTIME_NETWORK", string(sandboxapi.NetworkLimited))),
		CredentialsFile:  get("SANDBOX_GIT_CREDENTIALS_FILE", ""),
		LogLevel:         get("SANDBOX_LOG_LEVEL", "info"),
		DatabaseURL:      get("DATABASE_URL", ""),
		MetricsAddr:      get("SANDBOX_METRICS_ADDR", ""),
	}
	if err := hostFromEnv(&c, lookup, get); err != nil {
		return c, err
	}
	if err := timingFromEnv(&c, get); err != nil {
		return c, err
	}
	if err := sandboxUserFromEnv(&c, get); err != nil {
		return c, err
	}
	if err := networkFromEnv(&c, lookup, get); err != nil {
		return c, err
	}
	if err := runtimeFromEnv(&c, get); err != nil {
		return c, err
	}
	if err := serviceFromEnv(&c); err != nil {
		return c, err
	}
	var err error
	if c.Auth, err = authFromEnv(get, c.AllowHTTPURLs); err != nil {
		return c, err
	}
	if c.Eviction, err = evictionFromEnv(get); err != nil {
		return c, err
	}
	if c.Content, err = contentFromEnv(get); err != nil {
		return c, err
	}
	return c, nil
}

// hostFromEnv reads the connection to Temporal and its security, the data
// directory, the runtimes' environment, the host id, the embedded
// server's ports and the URL policy.
func hostFromEnv(c *Config, lookup func(string) (string, bool), get func(name, def string) string) (err error) {
	if c.Security, c.TemporalAddress, c.Namespace, err = securityFromEnv(lookup, get); err != nil {
		return err
	}
	if c.DataDir, err = dataDir(get("SANDBOX_DATA_DIR", "")); err != nil {
		return &ConfigError{"SANDBOX_DATA_DIR", get("SANDBOX_DATA_DIR", ""), err.Error()}
	}
	hostPath, _ := lookup("PATH")
	if c.Environment, err = environmentFromEnv(get, c.DataDir, hostPath); err != nil {
		return err
	}
	host, _ := os.Hostname()
	c.HostID = get("SANDBOX_HOST_ID", sanitizeHost(host))
	if err := sandboxapi.ValidateID("host id", c.HostID); err != nil {
		return &ConfigError{"SANDBOX_HOST_ID", c.HostID, sandboxapi.Message(err)}
	}
	if c.TemporalPort, err = port(get("SANDBOX_TEMPORAL_PORT", strconv.Itoa(DefaultTemporalPort)), false); err != nil {
		return &ConfigError{"SANDBOX_TEMPORAL_PORT", get("SANDBOX_TEMPORAL_PORT", ""), err.Error()}
	}
	if c.UIPort, err = port(get("SANDBOX_UI_PORT", strconv.Itoa(DefaultUIPort)), true); err != nil {
		return &ConfigError{"SANDBOX_UI_PORT", get("SANDBOX_UI_PORT", ""), err.Error()}
	}
	for name, dst := range map[string]*bool{"SANDBOX_ALLOW_FILE_URLS": &c.AllowFileURLs, "SANDBOX_ALLOW_HTTP_URLS": &c.AllowHTTPURLs} {
		v := get(name, "0")
		b, err := strconv.ParseBool(v)
		if err != nil {
			return &ConfigError{name, v, "want 1 or 0"}
		}
		*dst = b
	}
	return nil
}

// timingFromEnv reads the durations (freshness, idle rules, waits), where
// sessions run and the workflow cache size.
func timingFromEnv(c *Config, get func(name, def string) string) error {
	for _, d := range []struct {
		name string
		dst  *time.Duration
		def  time.Duration
	}{
		{"SANDBOX_FETCH_FRESHNESS", &c.FetchFreshness, DefaultFetchFreshness},
		{"SANDBOX_IDLE_STOP", &c.IdleStop, DefaultIdleStop},
		{"SANDBOX_IDLE_CLOSE", &c.IdleClose, DefaultIdleClose},
		{"SANDBOX_HOST_WAIT", &c.HostWait, DefaultHostWait},
		{"SANDBOX_PROCESS_MAX_IDLE", &c.ProcessMaxIdle, sandboxapi.DefaultProcessMaxIdle},
		{"SANDBOX_LOCK_WAIT", &c.LockWait, DefaultLockWait},
	} {
		v := get(d.name, d.def.String())
		dur, err := sandbox.ParseDuration(v)
		if err != nil || dur < 0 {
			return &ConfigError{d.name, v, "want a duration such as 30s, 20m or 6h, or a number of seconds"}
		}
		*d.dst = dur
	}
	onHost := "0"
	if c.TemporalAddress == "" {
		onHost = "1"
	}
	{
		v := get("SANDBOX_SESSION_ON_HOST_QUEUE", onHost)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return &ConfigError{"SANDBOX_SESSION_ON_HOST_QUEUE", v, "want 1 or 0"}
		}
		c.SessionOnHostQueue = b
	}
	{
		v := get("SANDBOX_WORKFLOW_CACHE_SIZE", strconv.Itoa(DefaultWorkflowCacheSize))
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxWorkflowCacheSize {
			return &ConfigError{"SANDBOX_WORKFLOW_CACHE_SIZE", v, fmt.Sprintf("want a number of workflow runs from 1 to %d", MaxWorkflowCacheSize)}
		}
		c.WorkflowCacheSize = n
	}
	if c.HostWait <= 0 {
		return &ConfigError{"SANDBOX_HOST_WAIT", c.HostWait.String(), "must be positive"}
	}
	if c.ProcessMaxIdle <= 0 {
		return &ConfigError{"SANDBOX_PROCESS_MAX_IDLE", c.ProcessMaxIdle.String(), "must be positive"}
	}
	if c.IdleStop <= 0 || c.IdleClose < c.IdleStop {
		return &ConfigError{"SANDBOX_IDLE_CLOSE", c.IdleClose.String(), "must be positive and at least SANDBOX_IDLE_STOP"}
	}
	return nil
}

// sandboxUserFromEnv reads the runtimes' resource hints and the host ids
// a sandbox's user maps to.
func sandboxUserFromEnv(c *Config, get func(name, def string) string) (err error) {
	if c.RuntimeResources, err = resourceHints(get); err != nil {
		return err
	}
	switch c.DiskVolumes = get("SANDBOX_DISK_VOLUMES", "off"); c.DiskVolumes {
	case "off", "auto", "on":
	default:
		return &ConfigError{"SANDBOX_DISK_VOLUMES", c.DiskVolumes, "want off, auto or on"}
	}
	for _, n := range []struct {
		name string
		dst  *uint32
	}{{"SANDBOX_RUNTIME_UID", &c.SandboxUID}, {"SANDBOX_RUNTIME_GID", &c.SandboxGID}} {
		v := get(n.name, "65534")
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil || id == 0 || id == 1<<32-1 {
			return &ConfigError{n.name, v, "want a host id from 1 to 4294967294 (never 0: a sandbox never runs as the host's root)"}
		}
		*n.dst = uint32(id)
	}
	return nil
}

// runtimeFromEnv checks SANDBOX_RUNTIME_PROVIDER against the runtime
// catalog and reads the named backend's own variables. auto: bubblewrap
// when usable, else Docker when SANDBOX_RUNTIME_IMAGE is set and the daemon
// answers, else the worker refuses to start (docs/DESIGN.md "Rules" 5:
// never a silent fallback to host subprocesses; local is explicit).
func runtimeFromEnv(c *Config, get func(name, def string) string) error {
	if c.RuntimeProvider == autoProvider {
		return nil
	}
	b, ok := runtimeBackendFor(c.RuntimeProvider)
	if !ok {
		return providerError(c.RuntimeProvider)
	}
	if b.settings != nil {
		return b.settings(c, get)
	}
	return nil
}

// serviceFromEnv checks the log level, the PostgreSQL DSN and the metrics
// address.
func serviceFromEnv(c *Config) error {
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return &ConfigError{"SANDBOX_LOG_LEVEL", c.LogLevel, "want debug, info, warn or error"}
	}
	if c.DatabaseURL != "" {
		// Checked here so a typo fails at start naming the variable; the value
		// is never echoed (it may hold a password).
		if _, err := postgres.ParseDSN(c.DatabaseURL); err != nil {
			return &ConfigError{"DATABASE_URL", "<set>", sandboxapi.Message(err)}
		}
	}
	if c.MetricsAddr != "" {
		if _, p, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return &ConfigError{"SANDBOX_METRICS_ADDR", c.MetricsAddr, "want host:port, e.g. :9464 or 127.0.0.1:9464"}
		} else if _, err := port(p, true); err != nil {
			return &ConfigError{"SANDBOX_METRICS_ADDR", c.MetricsAddr, "want host:port, e.g. :9464 or 127.0.0.1:9464"}
		}
	}
	return nil
}

// networkFromEnv reads SANDBOX_RUNTIME_NETWORK (already in c),
// SANDBOX_NETWORK_MAX and SANDBOX_NETWORK_ALLOW.
func networkFromEnv(c *Config, lookup func(string) (string, bool), get func(name, def string) string) error {
	if !c.RuntimeNetwork.Valid() {
		return &ConfigError{"SANDBOX_RUNTIME_NETWORK", string(c.RuntimeNetwork), "want none, limited or default"}
	}
	def := sandboxapi.NetworkLimited
	if c.RuntimeNetwork == sandboxapi.NetworkDefault {
		def = sandboxapi.NetworkDefault
	}
	c.NetworkMax = sandboxapi.Network(get("SANDBOX_NETWORK_MAX", string(def)))
	if !c.NetworkMax.Valid() {
		return &ConfigError{"SANDBOX_NETWORK_MAX", string(c.NetworkMax), "want none, limited or default"}
	}
	if !c.RuntimeNetwork.Within(c.NetworkMax) {
		return &ConfigError{"SANDBOX_RUNTIME_NETWORK", string(c.RuntimeNetwork), "above SANDBOX_NETWORK_MAX=" + string(c.NetworkMax)}
	}
	entries := egress.DefaultAllow
	if v, ok := lookup("SANDBOX_NETWORK_ALLOW"); ok {
		entries = sandboxapi.SplitNetworkAllow(v) // set and empty: none
	}
	allow, err := sandboxapi.CanonicalNetworkAllow("SANDBOX_NETWORK_ALLOW", entries)
	if err != nil {
		return &ConfigError{"SANDBOX_NETWORK_ALLOW", sandboxapi.Clip(strings.Join(entries, ","), 200), sandboxapi.Message(err)}
	}
	c.NetworkAllow = allow
	return nil
}

func dataDir(v string) (string, error) {
	if v == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no home directory; set it explicitly")
			}
			base = filepath.Join(home, ".local", "share")
		}
		v = filepath.Join(base, "sandboxcore")
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", err
	}
	return abs, nil
}

func port(v string, zeroOK bool) (int, error) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !zeroOK) {
		return 0, fmt.Errorf("want a TCP port number")
	}
	return p, nil
}

func sanitizeHost(h string) string {
	h = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, h)
	h = strings.TrimLeft(h, "-_")
	if h == "" {
		return "local"
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// DiskQuotaGB is a runtime's disk quota in GiB: SANDBOX_RUNTIME_DISK_GB,
// else bwrap.DefaultDiskGB (docs/SECURITY.md "Resource limits
// (bubblewrap)").
func (c Config) DiskQuotaGB() int64 {
	if c.RuntimeResources != nil && c.RuntimeResources.DiskGB > 0 {
		return c.RuntimeResources.DiskGB
	}
	return bwrap.DefaultDiskGB
}

// resourceHints reads SANDBOX_RUNTIME_CPUS (cores, from 0.01 to the
// machine's runtime.NumCPU(), such as 1.5), SANDBOX_RUNTIME_MEMORY_MB (MiB, at
// least 6: Docker's minimum), SANDBOX_RUNTIME_PIDS (processes, at least 1)
// and SANDBOX_RUNTIME_DISK_GB (GiB, at least 1: the disk quota of a
// bubblewrap runtime, the disk of a Daytona sandbox made from an image),
// each optional; nil when none is set. Errors: *ConfigError naming the variable.
func resourceHints(get func(name, def string) string) (*sandbox.ResourceHints, error) {
	var r sandbox.ResourceHints
	set := false
	if v := get("SANDBOX_RUNTIME_CPUS", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if n := runtime.NumCPU(); err != nil || !(f >= 0.01) || f > float64(n) {
			return nil, &ConfigError{"SANDBOX_RUNTIME_CPUS", v, fmt.Sprintf("want a number of cores from 0.01 to %d (this machine's), such as 1 or 0.5", n)}
		}
		r.CPU, set = f, true
	}
	for _, n := range []struct {
		name string
		dst  *int64
		min  int64 // Docker refuses less than 6 MiB of memory
	}{{"SANDBOX_RUNTIME_MEMORY_MB", &r.MemoryMB, 6}, {"SANDBOX_RUNTIME_PIDS", &r.Pids, 1}, {"SANDBOX_RUNTIME_DISK_GB", &r.DiskGB, 1}} {
		v := get(n.name, "")
		if v == "" {
			continue
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil || i < n.min || i > 1<<30 {
			return nil, &ConfigError{n.name, v, fmt.Sprintf("want a whole number from %d to %d", n.min, 1<<30)}
		}
		*n.dst, set = i, true
	}
	if !set {
		return nil, nil
	}
	return &r, nil
}
