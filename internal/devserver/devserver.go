// Package devserver embeds a single-process Temporal server (frontend, history,
// matching and worker services with SQLite persistence) and, optionally, the
// Temporal Web UI, for `make run` and the end-to-end tests. It is a small
// wrapper over the server's public APIs (temporal.NewServer with static hosts,
// the SQLite schema and namespace helpers, uiserver.NewServer); see DESIGN.md
// "Temporal versions and the embedded server".
package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// Options configure the embedded server.
type Options struct {
	// IP to bind every service to; default "127.0.0.1".
	IP string
	// Port of the frontend gRPC service; 0 picks a free port.
	Port int
	// UIPort of the Web UI; 0 disables the UI.
	UIPort int
	// DatabaseFile is the SQLite file; "" keeps everything in memory (tests).
	DatabaseFile string
	// Namespace to create; default "default".
	Namespace string
	// SearchAttributes are registered on a fresh database only; callers must
	// also register them idempotently through the operator service on every start.
	SearchAttributes map[string]enumspb.IndexedValueType
	// LogFile receives the server's own log (JSON lines); "" discards it.
	LogFile string
	// LogLevel is the server's log level ("debug", "info", "warn", "error"); default "warn".
	LogLevel string
	// TLS, when set, makes the frontend speak TLS (and, with a client CA,
	// require client certificates); the server's own connections then use
	// mutual TLS with an ephemeral internal CA (tls.go).
	TLS *TLS
	// UICodecEndpoint points the Web UI at a codec server (its codec setting
	// endpoint, with includeCredentials so the codec server's session cookie
	// is sent, and <endpoint>/login as the link the UI shows when a decode is
	// refused); "" leaves payloads shown as they are stored.
	UICodecEndpoint string
	// HistoryCacheSize is how many workflow executions' mutable states the
	// history service keeps in memory (history.hostLevelCacheMaxSize); 0 =
	// DefaultHistoryCacheSize. One not held is read from the database when
	// its workflow next has a task.
	HistoryCacheSize int
}

// DefaultHistoryCacheSize is the history cache, in workflow executions'
// mutable states, of an embedded server whose Options leave HistoryCacheSize
// 0 (the tests' shared server; a host passes its SANDBOX_WORKFLOW_CACHE_SIZE).
const DefaultHistoryCacheSize = 8096

// Server is a running embedded Temporal.
type Server struct {
	server temporal.Server
	ui     *webUI
	trap   *fatalTrap
	// Address is the frontend host:port.
	Address string
	// UIURL is the Web UI's base URL, "" when disabled.
	UIURL     string
	Namespace string
}

// ErrPortInUse is returned when a requested port is already taken (the UI
// server would otherwise panic in the background).
var ErrPortInUse = errors.New("devserver: port already in use")

// Start starts the server and returns once the frontend accepts connections.
// Errors: ErrPortInUse naming the port, or the server's own start error.
func Start(opts Options) (*Server, error) {
	if err := opts.fillDefaults(); err != nil {
		return nil, err
	}
	// The UI's port is bound now and held: nothing can take it between this
	// check and the UI's start (which could otherwise only fail by exiting).
	var uiLn net.Listener
	if opts.UIPort != 0 {
		l, err := listen(opts.IP, opts.UIPort, "SANDBOX_UI_PORT")
		if err != nil {
			return nil, err
		}
		uiLn = l
		defer func() {
			if uiLn != nil {
				_ = uiLn.Close()
			}
		}()
	}
	var pki *internalPKI
	if opts.TLS != nil {
		if err := opts.TLS.Check(); err != nil {
			return nil, fmt.Errorf("devserver: %w", err)
		}
		var err error
		if pki, err = newInternalPKI(); err != nil {
			return nil, fmt.Errorf("devserver: internal CA: %w", err)
		}
	}
	conf, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if pki != nil {
		conf.Global.TLS = pki.serverTLS(opts.TLS)
	}
	var base tlog.Logger = tlog.NewNoopLogger()
	if opts.LogFile != "" {
		base = tlog.NewZapLogger(tlog.BuildZapLogger(tlog.Config{Level: opts.LogLevel, OutputFile: opts.LogFile, Format: "json"}))
	}
	trap := &fatalTrap{Logger: base}
	var logger tlog.Logger = trap
	host := func(svc primitives.ServiceName) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(conf.Services[string(svc)].RPC.GRPCPort)))
	}
	dyn := staticDynamicConfig(opts.HistoryCacheSize)
	srv, err := startTrapped(trap, func() (temporal.Server, error) {
		srv, err := temporal.NewServer(
			temporal.WithConfig(conf),
			temporal.ForServices(temporal.DefaultServices),
			temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
				primitives.FrontendService: host(primitives.FrontendService),
				primitives.HistoryService:  host(primitives.HistoryService),
				primitives.MatchingService: host(primitives.MatchingService),
				primitives.WorkerService:   host(primitives.WorkerService),
			}),
			temporal.WithLogger(logger),
			temporal.WithDynamicConfigClient(dyn),
		)
		if err != nil {
			return nil, fmt.Errorf("devserver: new server: %w", err)
		}
		if err := srv.Start(); err != nil {
			return srv, fmt.Errorf("devserver: start: %w", err)
		}
		return srv, nil
	})
	if err != nil {
		return nil, err
	}
	s := &Server{server: srv, trap: trap, Address: net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port)), Namespace: opts.Namespace}
	if uiLn != nil {
		s.ui, err = startWebUI(uiLn, webUIConfig(opts, s.Address, pki))
		if err != nil {
			s.Stop()
			return nil, err
		}
		uiLn = nil // the UI owns it now
		s.UIURL = "http://" + net.JoinHostPort(opts.IP, strconv.Itoa(opts.UIPort))
	}
	return s, nil
}

// fillDefaults sets the defaults of the empty options (IP 127.0.0.1,
// namespace "default", log level "warn") and picks a free port when Port is
// 0; a given Port must be free (an error naming SANDBOX_TEMPORAL_PORT).
func (opts *Options) fillDefaults() error {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	if opts.Port == 0 {
		p, err := FreePort(opts.IP)
		if err != nil {
			return err
		}
		opts.Port = p
	} else if err := checkFree(opts.IP, opts.Port, "SANDBOX_TEMPORAL_PORT"); err != nil {
		return err
	}
	return nil
}

// staticDynamicConfig is the embedded server's dynamic configuration, the
// settings that differ from the server's defaults (docs/BENCHMARKS.md), with
// historyCache mutable states cached (0 = DefaultHistoryCacheSize).
func staticDynamicConfig(historyCache int) dynamicconfig.StaticClient {
	if historyCache <= 0 {
		historyCache = DefaultHistoryCacheSize
	}
	return dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 historyCache,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// One partition per task queue: a single worker polls it, and more
		// partitions only add matching latency on a one-host dev server.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// An activity scheduled on the workflow's own task queue is handed to
		// the worker in the workflow task's response, skipping a matching hop
		// (session workflows run on their host's queue: docs/BENCHMARKS.md).
		dynamicconfig.EnableActivityEagerExecution.Key(): true,
		// The single history shard reads new transfer tasks at most this often
		// per second (default 20, i.e. up to 50 ms per workflow-task hop).
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 500,
	}
}

// webUIConfig is the Web UI's configuration for the server at address
// (its TLS from pki when not nil; the codec endpoint when one is set).
func webUIConfig(opts Options, address string, pki *internalPKI) *uiconfig.Config {
	uc := &uiconfig.Config{
		Host:                opts.IP,
		Port:                opts.UIPort,
		TemporalGRPCAddress: address,
		EnableUI:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		DefaultNamespace:    opts.Namespace,
	}
	if pki != nil {
		uc.TLS = pki.uiTLS()
	}
	if opts.UICodecEndpoint != "" {
		// A refused decode (no session yet) shows this message and link.
		uc.Codec = uiconfig.Codec{Endpoint: opts.UICodecEndpoint, IncludeCredentials: true,
			DefaultErrorMessage: "Payloads are encrypted: log in to the codec server with its token to read them",
			DefaultErrorLink:    opts.UICodecEndpoint + "/login"}
	}
	return uc
}

// startTrapped runs start (temporal.NewServer and Server.Start) in its own
// goroutine, where a Fatal of the server's logger (fatalTrap) panics with a
// fatalPanic that is recovered here; it then returns the recorded fatal
// error, after stopping what was started (bounded: a half-started server
// may not stop cleanly).
func startTrapped(trap *fatalTrap, start func() (temporal.Server, error)) (temporal.Server, error) {
	type result struct {
		srv temporal.Server
		err error
	}
	ch := make(chan result, 1)
	var started temporal.Server
	var mu sync.Mutex
	trap.starting.Store(true)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			if p := recover(); p != nil {
				if _, ok := p.(fatalPanic); !ok {
					panic(p) // not ours
				}
			}
			ch <- result{err: trap.err()} // fatalTrap.Fatal: a panic, or runtime.Goexit
		}()
		srv, err := start()
		mu.Lock()
		started = srv
		mu.Unlock()
		returned = true
		ch <- result{srv, err}
	}()
	r := <-ch
	trap.starting.Store(false)
	if r.err == nil {
		if ferr := trap.err(); ferr != nil {
			r.err = ferr
		}
	}
	if r.err != nil {
		mu.Lock()
		srv := started
		mu.Unlock()
		if srv == nil {
			srv = r.srv
		}
		if srv != nil {
			done := make(chan struct{})
			go func() { defer close(done); _ = srv.Stop() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				slog.Warn("devserver: the half-started embedded temporal did not stop within 10s; leaving it")
			}
		}
		if !errors.Is(r.err, ErrPortInUse) && strings.Contains(r.err.Error(), "address already in use") {
			return nil, fmt.Errorf("%w: %v", ErrPortInUse, r.err)
		}
		return nil, r.err
	}
	return r.srv, nil
}

// Err returns the first fatal error the embedded server raised after Start
// (its goroutine stopped; the process did not exit), or nil.
func (s *Server) Err() error { return s.trap.err() }

// Stop stops the UI and the server.
func (s *Server) Stop() {
	if s.ui != nil {
		s.ui.stop()
	}
	_ = s.server.Stop()
}

func buildConfig(opts Options) (*config.Config, error) {
	httpPort, err := FreePort(opts.IP)
	if err != nil {
		return nil, err
	}
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = opts.IP
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	sqlConf, err := sqlConfig(opts)
	if err != nil {
		return nil, err
	}
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	const clusterName = "active"
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port)),
				HTTPAddress:            net.JoinHostPort(opts.IP, strconv.Itoa(httpPort)),
				ClusterID:              "sandboxcore-dev",
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		var svc config.Service
		svc.RPC.BindOnIP = opts.IP
		if name == "frontend" {
			svc.RPC.GRPCPort = opts.Port
			svc.RPC.HTTPPort = httpPort
		} else {
			p, err := FreePort(opts.IP)
			if err != nil {
				return nil, err
			}
			svc.RPC.GRPCPort = p
		}
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	return &conf, nil
}

func sqlConfig(opts Options) (*config.SQL, error) {
	conf := config.SQL{PluginName: sqliteplugin.PluginName}
	if opts.DatabaseFile == "" {
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		// The SQLite plugin creates the schema of an in-memory database itself.
		conf.DatabaseName = "sandboxcore-" + strconv.Itoa(rand.IntN(1<<30))
	} else {
		// The plugin passes every attribute but SQLite's URI parameters as
		// `_pragma=key=value`, so the keys are the pragmas' own names (an
		// unknown pragma is silently ignored by SQLite). WAL: a commit appends
		// to the log instead of rewriting pages through a rollback journal;
		// synchronous NORMAL: no fsync per commit, only at checkpoints (a
		// crash of the machine can lose the last commits, never corrupt the
		// file). Measured: docs/BENCHMARKS.md "Scale".
		conf.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "NORMAL"}
		conf.DatabaseName = opts.DatabaseFile
		if err := os.MkdirAll(filepath.Dir(opts.DatabaseFile), 0o755); err != nil {
			return nil, fmt.Errorf("devserver: database dir: %w", err)
		}
		if _, err := os.Stat(opts.DatabaseFile); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(&conf); err != nil {
				return nil, fmt.Errorf("devserver: schema setup: %w", err)
			}
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace config: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(&conf, ns); err != nil {
		return nil, fmt.Errorf("devserver: create namespace: %w", err)
	}
	return &conf, nil
}

// FreePort returns a TCP port on ip that was free a moment ago.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkFree(ip string, port int, variable string) error {
	l, err := listen(ip, port, variable)
	if err != nil {
		return err
	}
	return l.Close()
}

// listen binds ip:port; a failure is ErrPortInUse naming variable.
func listen(ip string, port int, variable string) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s:%d (another worker may be running there: stop it, or set %s to another port; a second worker also needs its own SANDBOX_DATA_DIR): %v", ErrPortInUse, ip, port, variable, err)
	}
	return l, nil
}
