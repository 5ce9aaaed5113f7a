package daytona

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// TestConformance runs the runtime conformance suite on Daytona (the fake):
// the suite looks at the sandbox's replica through remoteFiles and at the
// host worktree as the durable workspace.
func TestConformance(t *testing.T) {
	srv := newFake(t, fake.Options{})
	runtimetest.Run(t, func(t *testing.T) runtimetest.Env {
		p := newProvider(t, srv, nil)
		dir := t.TempDir()
		spec := runtimetest.WorkspaceSpec("daytona", dir)
		spec.Workdir = fake.SandboxWorkspace
		spec.Mounts[0].Target = spec.Workdir
		return runtimetest.Env{
			Provider:  p,
			Spec:      spec,
			Files:     remoteFiles{p: p, id: spec.ID, dir: spec.Workdir},
			Workspace: runtimetest.HostFiles(dir),
			Reopen: func(t *testing.T) sandbox.RuntimeProvider {
				opts := p.opts
				p2, err := New(opts)
				if err != nil {
					t.Fatal(err)
				}
				return p2
			},
		}
	}, runtimetest.Options{})
}

// remoteFiles reaches into a runtime's sandbox through the toolbox, bypassing
// the replica's sync.
type remoteFiles struct {
	p   *Provider
	id  string
	dir string
}

func (f remoteFiles) sh(script string) (int, string, error) {
	rt := f.p.runtimeFor(f.id)
	// A stopped sandbox is started to look into it (its processes are gone).
	if _, err := rt.ensure(context.Background()); err != nil {
		return 0, "", err
	}
	code, out, err := rt.run(context.Background(), "cd "+replica.ShQuote(f.dir)+" || exit 90\n"+script)
	return code, string(out), err
}

func (f remoteFiles) check(code int, out string, err error) error {
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("exit %d: %s", code, out)
	}
	return nil
}

func (f remoteFiles) WriteFile(rel string, data []byte, perm os.FileMode) error {
	return f.check(f.sh(fmt.Sprintf("printf %%s %s | base64 -d > %s && chmod %o %s",
		replica.ShQuote(base64.StdEncoding.EncodeToString(data)), replica.ShQuote(rel), perm, replica.ShQuote(rel))))
}

func (f remoteFiles) ReadFile(rel string) ([]byte, error) {
	code, out, err := f.sh("base64 -w0 " + replica.ShQuote(rel))
	if err := f.check(code, out, err); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(strings.TrimSpace(out))
}

func (f remoteFiles) MkdirAll(rel string) error {
	return f.check(f.sh("mkdir -p " + replica.ShQuote(rel)))
}

func (f remoteFiles) Symlink(target, rel string) error {
	// -sfn: the helper may run twice (a retried run), and must then leave the
	// same link, not one inside it.
	return f.check(f.sh("ln -sfn " + replica.ShQuote(target) + " " + replica.ShQuote(rel)))
}

func (f remoteFiles) Exists(rel string) bool {
	code, _, err := f.sh("test -e " + replica.ShQuote(rel) + " || test -L " + replica.ShQuote(rel))
	return err == nil && code == 0
}

func (f remoteFiles) Size(rel string) int64 {
	code, out, err := f.sh("stat -c %s " + replica.ShQuote(rel) + " 2>/dev/null || echo -1")
	if err != nil || code != 0 {
		return -1
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if perr != nil {
		return -1
	}
	return n
}
