package replica

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Transport is what a remote backend offers the replica mechanism: files up
// and down, and a shell script run in the sandbox. Errors are the backend's
// mapped errors (sandboxapi.ErrNotFound when the sandbox vanished,
// sandboxapi.ErrRuntimeUnavailable, …): Sync returns them unchanged.
type Transport interface {
	// Upload copies the host file local to the sandbox path remote (its
	// directory is created).
	Upload(ctx context.Context, local, remote string) error
	// Run runs script with sh in the sandbox and returns its exit code and
	// its combined output (for error messages only).
	Run(ctx context.Context, script string) (exitCode int, output []byte, err error)
	// Download copies the sandbox file remote to the host file local,
	// refusing more than limit bytes (sandboxapi.ErrResourceLimit).
	Download(ctx context.Context, remote, local string, limit int64) error
}

// ResultScript returns the script tail that packs the pass's out directory
// into $P/result.tar (the one file a backend downloads): run it after
// rp_collect (or after a failed rp_apply) in the same script.
func ResultScript() string {
	return `tar -c -f "$P/result.tar" -C "$P/out" . 2>/dev/null || { mkdir -p "$P/out"; echo 92 > "$P/out/status"; tar -c -f "$P/result.tar" -C "$P/out" .; }` + "\n"
}

// ResultPath returns the remote path of the pass's result archive.
func (p *Pass) ResultPath() string { return path.Join(p.Dir(), "result.tar") }

// Sync runs one pass with no command in between: upload, apply and collect in
// one remote script, download, Finish; it repeats the pass (at most twice)
// when the remote asks for the whole manifest or a full bundle. It is what a
// backend calls to bring back what happened in the sandbox outside commands
// (before hibernating) and to restore a read-only replica. Errors: the
// transport's, and Finish's.
func (r *Replica) Sync(ctx context.Context, t Transport) (Report, error) {
	fullBundle := false
	for attempt := 0; ; attempt++ {
		p, err := r.begin(ctx, fullBundle)
		if err != nil {
			return Report{}, err
		}
		out, rep, err := p.run(ctx, t, "")
		p.Close()
		if err != nil || out == Applied || attempt >= 2 {
			return rep, err
		}
		fullBundle = out == NeedGit
	}
}

// run uploads the parts, runs apply, middle (a script fragment run when
// apply succeeded; "" for none) and collect, downloads and finishes.
func (p *Pass) run(ctx context.Context, t Transport, middle string) (Outcome, Report, error) {
	for _, part := range p.Parts() {
		if err := t.Upload(ctx, part.Local, part.Remote); err != nil {
			return Applied, Report{}, err
		}
	}
	script := p.Vars() + Lib() + "rp_apply\nrp_s=$?\nif [ \"$rp_s\" -eq 0 ]; then\n" + middle + "\nrp_collect\nfi\n" + ResultScript() + "exit 0\n"
	if code, out, err := t.Run(ctx, script); err != nil {
		return Applied, Report{}, err
	} else if code != 0 {
		return Applied, Report{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: the sync script failed (%d): %s", code, sandboxapi.Clip(strings.TrimSpace(string(out)), 500))
	}
	dir, err := os.MkdirTemp("", "sandboxcore-result-")
	if err != nil {
		return Applied, Report{}, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: temp dir")
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "result.tar")
	if err := t.Download(ctx, p.ResultPath(), local, p.r.maxReport+64<<20); err != nil {
		return Applied, Report{}, err
	}
	out := filepath.Join(dir, "out")
	if err := ExtractFlat(local, out, p.r.maxReport+64<<20); err != nil {
		return Applied, Report{}, err
	}
	return p.Finish(ctx, Result{Dir: out})
}

var flatName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ExtractFlat extracts a result archive (regular files with plain names,
// the "." directory) into dir, refusing anything else and more than limit
// bytes in all: the archive comes from the sandbox and is hostile. Errors
// wrap sandboxapi.ErrRuntimeUnavailable or sandboxapi.ErrResourceLimit.
func ExtractFlat(archive, dir string, limit int64) error {
	f, err := os.Open(archive)
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: open result")
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: result dir")
	}
	tr := tar.NewReader(f)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: malformed result archive")
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeDir && (name == "" || name == ".") {
			continue
		}
		if h.Typeflag != tar.TypeReg || !flatName.MatchString(name) {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: unexpected entry %q in the result archive", sandboxapi.Clip(h.Name, 100))
		}
		total += h.Size
		if h.Size < 0 || total > limit {
			return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "replica: the result exceeds %d bytes", limit)
		}
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write result")
		}
		_, err = io.CopyN(out, tr, h.Size)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write result")
		}
	}
}
