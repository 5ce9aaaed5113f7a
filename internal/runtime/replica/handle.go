package replica

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SpecReplica is the part of a remote runtime's handle that this package
// keeps: the runtime's spec and the replica of its workspace opened from
// it. The exported fields are set when the handle is made and not changed
// afterwards; until Set or Load it holds no spec and no replica. It is safe
// for concurrent use.
type SpecReplica struct {
	// Kind prefixes the errors ("daytona", "e2b").
	Kind string
	// ID is the runtime id.
	ID string
	// StateDir is the runtime's host state directory (its spec, the
	// replica's state, the hibernation mark).
	StateDir string
	// RemoteState is the replica's bookkeeping directory in the sandbox that
	// a replica opens with (Replica.SetStateDir changes it once the backend
	// knows it).
	RemoteState string
	// Git is the host's git runner (bundles of the workspace's repository).
	Git *gitx.Runner
	// Log receives the replica's log.
	Log *slog.Logger

	mu   sync.Mutex
	spec *sandbox.RuntimeSpec
	rep  *Replica
}

// Set records spec (also on disk, so that a restarted worker can destroy
// or hibernate the runtime by id) and opens the replica of its workspace
// mount (OpenSpec), unless the same spec is held already with its replica.
// Errors: OpenSpec's (sandboxapi.ErrInvalidArgument for a spec without a
// workspace mount at its workdir).
func (s *SpecReplica) Set(spec sandbox.RuntimeSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spec != nil && s.rep != nil && SpecEqual(*s.spec, spec) {
		return nil
	}
	rep, err := OpenSpec(spec, s.StateDir, s.RemoteState, s.Git, s.Log)
	if err != nil {
		return err
	}
	c := spec
	s.spec, s.rep = &c, rep
	return nil
}

// Load sets the spec recorded by Set in StateDir when none is held.
// Errors: LoadSpec's (os.ErrNotExist when none was recorded), Set's.
func (s *SpecReplica) Load() error {
	s.mu.Lock()
	has := s.spec != nil
	s.mu.Unlock()
	if has {
		return nil
	}
	spec, err := LoadSpec(s.StateDir)
	if err != nil {
		return err
	}
	return s.Set(spec)
}

// Get returns the spec and the replica held (nil, nil: none), read
// together.
func (s *SpecReplica) Get() (*sandbox.RuntimeSpec, *Replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec, s.rep
}

// Replica returns the replica held (nil without a spec).
func (s *SpecReplica) Replica() *Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rep
}

// Recorded returns the replica state this host records for the runtime
// (Status as the wire says it; no remote call), false when the host has no
// spec of it (never created here, or destroyed) or it cannot be read.
func (s *SpecReplica) Recorded() (sandboxapi.RuntimeReplica, bool) {
	if _, err := os.Stat(filepath.Join(s.StateDir, SpecFile)); err != nil {
		return sandboxapi.RuntimeReplica{}, false
	}
	if err := s.Load(); err != nil {
		return sandboxapi.RuntimeReplica{}, false
	}
	rep := s.Replica()
	if rep == nil {
		return sandboxapi.RuntimeReplica{}, true
	}
	return rep.Status().API(), true
}

// Env returns the environment of the spec held (RuntimeSpec.Env; nil
// without a spec).
func (s *SpecReplica) Env() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spec == nil {
		return nil
	}
	return s.spec.Env
}

// Clear drops the spec and the replica held and returns that replica (nil:
// none), whose host state the caller then forgets (Replica.Forget); the next
// Create sets them again.
func (s *SpecReplica) Clear() *Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := s.rep
	s.spec, s.rep = nil, nil
	return rep
}

// Exec is the part of a remote runtime's ExecStream before anything is
// sent: it checks req (runspec.ValidateExec), answers a command whose name
// begins with "-" with sh's 127 "command not found" without running
// anything (onChunk receives that line), loads the spec (Load; a failure
// there shows as no workspace), checks that a replica is held and that
// req asks for the runtime's own network only (procexec.SingleNetwork: one
// network for the whole sandbox), then returns what run returns with the
// replica. Errors: ValidateExec's; sandboxapi.ErrInvalidArgument
// ("<kind>: runtime <id> has no workspace (create it with its spec)");
// SingleNetwork's; run's.
func (s *SpecReplica) Exec(req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk), run func(rep *Replica) (sandboxapi.ExecResult, error)) (sandboxapi.ExecResult, error) {
	if err := runspec.ValidateExec(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	if strings.HasPrefix(req.Cmd[0], "-") {
		out := procexec.NewOutput(req.OutputCap(), onChunk)
		return out.Notice(127, req.Cmd[0], "command not found"), nil
	}
	_ = s.Load()
	spec, rep := s.Get()
	if rep == nil {
		return sandboxapi.ExecResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: runtime %s has no workspace (create it with its spec)", s.Kind, s.ID)
	}
	if err := procexec.SingleNetwork(s.Kind, "exec", spec, req.Network); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	return run(rep)
}

// HibernatedFile is the mark in a remote runtime's host state directory
// that Stop hibernated the runtime after a successful sync and it has run
// nothing since: its sandbox holds nothing the host lacks, so Destroy need
// not sync it first and a create refused for quota may delete it.
const HibernatedFile = "hibernated"

// Hibernated reports whether stateDir holds the HibernatedFile mark.
func Hibernated(stateDir string) bool {
	_, err := os.Stat(filepath.Join(stateDir, HibernatedFile))
	return err == nil
}

// MarkHibernated writes the HibernatedFile mark in stateDir (0600). A
// failure is ignored: a missing mark only costs a sync that was not needed.
func MarkHibernated(stateDir string) {
	_ = os.WriteFile(filepath.Join(stateDir, HibernatedFile), nil, 0o600)
}

// ClearHibernated removes the HibernatedFile mark from stateDir (the
// runtime is about to run something, or its sandbox is new). A failure is
// ignored.
func ClearHibernated(stateDir string) {
	_ = os.Remove(filepath.Join(stateDir, HibernatedFile))
}
