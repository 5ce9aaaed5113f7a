package hostworker

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona"
	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b"
	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/volume"
)

// The runtime catalog: every backend SANDBOX_RUNTIME_PROVIDER can name,
// each registered once with its kind, the variables it reads and how it is
// built (docs/RUNTIMES.md, README "Configuration"). The configuration's
// check, the worker's errors and the start-up choice are derived from it;
// a test holds sandboxapi.RuntimeKinds (the published schema's list) to it.

// autoProvider is SANDBOX_RUNTIME_PROVIDER's default: bubblewrap when
// usable, else Docker (runtimeProvider). It is a choice, not a backend.
const autoProvider = "auto"

// runtimeBackend is one entry of the runtime catalog.
type runtimeBackend struct {
	// kind is the provider's Kind() and SANDBOX_RUNTIME_PROVIDER's value.
	kind string
	// settings reads and checks the backend's own variables into c at
	// start (nil: it has none); errors are *ConfigError.
	settings func(c *Config, get func(name, def string) string) error
	// build makes the provider from a checked configuration; git is the
	// host's git runner (nil: the backend makes its own when it needs one),
	// hp the host's parts a runtime may use (the egress proxy, volumes).
	build func(ctx context.Context, cfg Config, git *gitx.Runner, hp hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error)
}

// hostParts are what the host made before its runtime provider and a
// provider may use: the egress proxy of the limited network and the disk
// volumes (each nil: none).
type hostParts struct {
	egress  *egress.Proxy
	volumes *volume.Manager
}

// runtimeBackends lists the catalog in sandboxapi.RuntimeKinds order.
var runtimeBackends = []runtimeBackend{
	{kind: local.Kind, build: buildLocal},
	{kind: bwrap.Kind, build: buildBwrap},
	{kind: docker.Kind, settings: dockerSettings, build: buildDocker},
	{kind: daytona.Kind, settings: daytonaSettings, build: buildDaytona},
	{kind: e2b.Kind, settings: e2bSettings, build: buildE2B},
}

// runtimeBackendFor returns the catalog's entry of kind.
func runtimeBackendFor(kind string) (runtimeBackend, bool) {
	for _, b := range runtimeBackends {
		if b.kind == kind {
			return b, true
		}
	}
	return runtimeBackend{}, false
}

// providerChoices is what SANDBOX_RUNTIME_PROVIDER accepts, for errors
// and help: "auto, local, bwrap, docker, daytona or e2b".
func providerChoices() string {
	kinds := []string{autoProvider}
	for _, b := range runtimeBackends {
		kinds = append(kinds, b.kind)
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " or " + kinds[len(kinds)-1]
}

// providerError is the refusal of an unknown SANDBOX_RUNTIME_PROVIDER.
func providerError(value string) *ConfigError {
	return &ConfigError{"SANDBOX_RUNTIME_PROVIDER", value, "want " + providerChoices()}
}

func dockerSettings(c *Config, _ func(name, def string) string) error {
	if c.RuntimeImage == "" {
		return &ConfigError{"SANDBOX_RUNTIME_IMAGE", "", "required with SANDBOX_RUNTIME_PROVIDER=docker (an image present on the daemon: images are never pulled)"}
	}
	return nil
}

func daytonaSettings(c *Config, get func(name, def string) string) (err error) {
	c.Daytona, err = daytonaFromEnv(get, c.AllowHTTPURLs)
	return err
}

func e2bSettings(c *Config, get func(name, def string) string) (err error) {
	c.E2B, err = e2bFromEnv(get)
	return err
}

// buildLocal: plain host subprocesses, no isolation; only when named.
func buildLocal(_ context.Context, cfg Config, _ *gitx.Runner, _ hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	log.Warn("runtime provider 'local' runs commands as plain host subprocesses with NO isolation (SANDBOX_RUNTIME_PROVIDER=local)")
	return local.New(local.Options{Logger: log, Supervisor: cfg.SupervisorBinary, StateDir: filepath.Join(cfg.DataDir, "runtimes", "local"),
		BaseEnv: cfg.Environment.baseEnv()}), nil
}

// buildBwrap: the sandbox sees neither the data directory (other
// workspaces, repo caches, the SQLite store) nor the credentials file,
// even when they lie under a read-only system path.
func buildBwrap(ctx context.Context, cfg Config, _ *gitx.Runner, hp hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	hidden := []string{cfg.DataDir}
	if cfg.CredentialsFile != "" {
		if abs, err := filepath.Abs(cfg.CredentialsFile); err == nil {
			hidden = append(hidden, abs)
		}
	}
	hidden = append(hidden, cfg.Auth.secretPaths()...) // credentials dir, GitHub App key
	return bwrap.New(ctx, bwrap.Options{ScratchDir: filepath.Join(cfg.DataDir, "runtimes", "bwrap"), HiddenPaths: hidden, Logger: log,
		Supervisor: cfg.SupervisorBinary, Egress: hp.egress, SandboxUID: cfg.SandboxUID, SandboxGID: cfg.SandboxGID,
		BaseEnv: cfg.Environment.baseEnv(), Volumes: hp.volumes})
}

func buildDocker(ctx context.Context, cfg Config, _ *gitx.Runner, hp hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	return docker.New(ctx, docker.Options{Image: cfg.RuntimeImage, Logger: log, Supervisor: cfg.SupervisorBinary,
		StateDir: filepath.Join(cfg.DataDir, "runtimes", "docker"), Egress: hp.egress})
}

// buildDaytona: each sandbox a replica of its workspace (README "Daytona"),
// named and labelled for this host id (the deployment), the replicas' host
// state under <data dir>/replicas.
func buildDaytona(_ context.Context, cfg Config, git *gitx.Runner, _ hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	d := cfg.Daytona
	p, err := daytona.New(daytona.Options{
		APIURL: d.APIURL, APIKey: d.APIKey, Snapshot: d.Snapshot, Image: d.Image, Target: d.Target,
		AutoStopMinutes: d.AutoStopMinutes, AutoArchiveMinutes: d.AutoArchiveMinutes,
		Deployment: cfg.HostID, StateDir: filepath.Join(cfg.DataDir, "replicas"), Git: git, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("runtime provider: daytona", "daytona", d.String(), "deployment", cfg.HostID)
	return p, nil
}

func buildE2B(_ context.Context, cfg Config, git *gitx.Runner, _ hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	return newE2B(cfg, git, log, false)
}

// buildNamed builds the backend SANDBOX_RUNTIME_PROVIDER names (not auto);
// a failure names the variable and its value.
func buildNamed(ctx context.Context, cfg Config, git *gitx.Runner, hp hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	b, ok := runtimeBackendFor(cfg.RuntimeProvider)
	if !ok {
		return nil, providerError(cfg.RuntimeProvider)
	}
	p, err := b.build(ctx, cfg, git, hp, log)
	if err != nil {
		return nil, fmt.Errorf("SANDBOX_RUNTIME_PROVIDER=%s: %w", b.kind, err)
	}
	return p, nil
}
