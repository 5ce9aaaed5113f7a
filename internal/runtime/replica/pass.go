package replica

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Pass is one sync round trip: Begin computed the host's changes and wrote
// the parts to upload; the remote runs Vars, Lib, rp_apply, (the command,)
// rp_collect; Finish applies what came back. A Pass is used by one goroutine.
type Pass struct {
	r        *Replica
	remote   Layout
	id       string
	mode     mode
	base     string
	beginSeq int64
	head     string
	branch   string
	// host holds the host files as seen by Begin; changed the paths sent.
	host    map[string]hostFile
	sent    map[string]entry
	deleted []string
	// absent: paths the view states as missing on the host without deleting
	// them remotely (rechecks).
	absent []string
	// guard: the paths the host changed or deleted since the agreed state,
	// which the replica may have changed too (rp_guard; incremental passes
	// of a writable replica only).
	guard  []string
	parts  []string // local files, in order
	tmpDir string
	// Warnings from Begin (files that could not be read).
	warnings []string
}

// Part is one file to upload before the remote script runs.
type Part struct {
	// Local is the host file; Remote the sandbox path to upload it to.
	Local, Remote string
}

// Dir returns the pass's remote directory ($S/pass/<id>).
func (p *Pass) Dir() string { return path.Join(p.remote.StateDir, "pass", p.id) }

// OutDir returns the remote directory rp_collect fills ($P/out).
func (p *Pass) OutDir() string { return path.Join(p.Dir(), "out") }

// Parts returns the files to upload, in order (none when nothing changed on
// the host and the replica's git is current).
func (p *Pass) Parts() []Part {
	out := make([]Part, len(p.parts))
	for i, l := range p.parts {
		out[i] = Part{Local: l, Remote: path.Join(p.Dir(), "part."+strconv.Itoa(i)+".tar")}
	}
	return out
}

// Uploads reports how many bytes Parts holds.
func (p *Pass) Uploads() int64 {
	var n int64
	for _, l := range p.parts {
		if fi, err := os.Stat(l); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Close removes the pass's local files.
func (p *Pass) Close() {
	if p.tmpDir != "" {
		_ = os.RemoveAll(p.tmpDir)
	}
}

// Begin starts a pass: it walks the host worktree, finds what changed since
// the agreed state (hashing only files whose stat changed) and writes the
// upload parts (changed contents, the host's view, deletions, the replica's
// git HEAD and a bundle when HEAD moved). Errors wrap
// sandboxapi.ErrRuntimeUnavailable (the worktree or its git is unreadable).
func (r *Replica) Begin(ctx context.Context) (*Pass, error) {
	return r.begin(ctx, false)
}

// BeginWith is Begin that, with fullBundle, sends the replica's git a full
// bundle (after a pass whose Finish answered NeedGit).
func (r *Replica) BeginWith(ctx context.Context, fullBundle bool) (*Pass, error) {
	return r.begin(ctx, fullBundle)
}

// begin is Begin and BeginWith: read HEAD, walk the worktree, plan the
// uploads, make the bundle and write the parts.
func (r *Replica) begin(ctx context.Context, fullBundle bool) (*Pass, error) {
	head, branch, err := r.readHead(ctx)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.src.WorkTree)
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: open worktree")
	}
	defer root.Close()

	r.mu.Lock()
	st := r.st
	known := st.Files
	revert := st.Revert
	recheck := st.Recheck
	r.mu.Unlock()
	files, warnings, err := r.walk(root, known)
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: walk worktree")
	}
	if err := ctxErr(ctx, "walk worktree"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	remote := r.remote
	r.mu.Unlock()
	p := &Pass{r: r, remote: remote, id: newID(), mode: st.Mode, base: st.Tree, beginSeq: st.Seq, head: head, branch: branch,
		host: files, sent: map[string]entry{}, warnings: warnings}
	p.mode, p.base = passMode(st.Mode, st.Tree)
	send, view := p.plan(known, revert, recheck)

	p.tmpDir, err = os.MkdirTemp("", "sandboxcore-pass-")
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: temp dir")
	}
	var bundle string
	needGit := fullBundle || p.mode == modeUpload || st.Head != head || st.Branch != branch
	if needGit && head != "" {
		old := st.Head
		if fullBundle || p.mode == modeUpload {
			old = ""
		}
		bundle, err = r.bundle(ctx, p.tmpDir, old)
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	if len(send) == 0 && len(view) == 0 && len(p.deleted) == 0 && len(p.absent) == 0 && bundle == "" {
		return p, nil // nothing to upload
	}
	if err := p.writeParts(root, send, view, bundle); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// passMode returns the mode of a pass and the tree it compares with, from
// the state's mode and agreed tree: incremental against the agreed tree
// unless the state asks for another mode, upload when nothing was ever
// agreed; every mode but incremental compares with the empty tree.
func passMode(stateMode mode, tree string) (mode, string) {
	m := stateMode
	if m == "" {
		m = modeIncr
		if tree == "" {
			m = modeUpload
		}
	}
	if m != modeIncr {
		return m, EmptyTree
	}
	return m, tree
}

// plan decides what goes up, given the agreed files known, the paths to
// revert and those to recheck: the contents to send (upload: all; else
// changed or to revert) and the paths of the host's view (incremental:
// changes, reverts and rechecks; else everything), both sorted; it sets
// p.deleted (agreed but gone from the host, or made by the replica alone
// and to revert) and p.absent (to recheck, not on the host).
func (p *Pass) plan(known map[string]entry, revert, recheck map[string]bool) (send, view []string) {
	files := p.host
	for fp, hf := range files {
		old, had := known[fp]
		changed := !had || old.Mode != hf.Mode || old.Blob != hf.Blob
		if p.mode == modeUpload || changed || revert[fp] {
			send = append(send, fp)
		}
		if changed && !revert[fp] {
			p.guard = append(p.guard, fp)
		}
		if p.mode != modeIncr || changed || revert[fp] || recheck[fp] {
			view = append(view, fp)
		}
	}
	for fp := range known {
		if _, ok := files[fp]; !ok {
			p.deleted = append(p.deleted, fp)
			p.guard = append(p.guard, fp)
		}
	}
	if p.mode != modeIncr || p.r != nil && p.r.src.ReadOnly {
		p.guard = nil // nothing to compare with, or nothing the replica may keep
	}
	for fp := range revert {
		if _, ok := files[fp]; !ok {
			if _, k := known[fp]; !k {
				p.deleted = append(p.deleted, fp) // made by the replica alone
			}
		}
	}
	for fp := range recheck {
		if _, ok := files[fp]; !ok && !revert[fp] {
			if _, k := known[fp]; !k {
				p.absent = append(p.absent, fp) // the view says "not on the host"
			}
		}
	}
	sort.Strings(send)
	sort.Strings(p.guard)
	sort.Strings(p.deleted)
	sort.Strings(view)
	return send, view
}

// partWriter writes the upload parts of a pass, one tar at a time.
type partWriter struct {
	p     *Pass
	cur   *os.File
	tw    *tar.Writer
	bytes int64 // of contents in the current part (approximate)
}

// next starts a new part (part.N.tar in the pass's temp dir).
func (w *partWriter) next() error {
	f, err := os.Create(filepath.Join(w.p.tmpDir, "part."+strconv.Itoa(len(w.p.parts))+".tar"))
	if err != nil {
		return err
	}
	w.p.parts = append(w.p.parts, f.Name())
	w.cur, w.tw, w.bytes = f, tar.NewWriter(f), 0
	// Every part has the "w" directory, so extracting "w" never fails.
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "w/", Mode: 0o755, Format: tar.FormatPAX})
}

// close ends the current part, if any.
func (w *partWriter) close() error {
	if w.cur == nil {
		return nil
	}
	err := w.tw.Close()
	if cerr := w.cur.Close(); err == nil {
		err = cerr
	}
	w.cur = nil
	return err
}

// fail closes the current part and wraps err as
// sandboxapi.ErrRuntimeUnavailable.
func (w *partWriter) fail(err error) error {
	_ = w.close()
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write upload")
}

// ctl writes the control file ctl/name holding data.
func (w *partWriter) ctl(name string, data []byte) error {
	if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ctl/" + name, Size: int64(len(data)), Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// ctlFile writes the host file src as the control file ctl/name.
func (w *partWriter) ctlFile(name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil {
		err = w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ctl/" + name, Size: fi.Size(), Mode: 0o644, Format: tar.FormatPAX})
	}
	if err == nil {
		_, err = io.Copy(w.tw, f)
	}
	return err
}

// writeParts writes part.0 (control files and the first contents) and as
// many further parts as the contents need.
func (p *Pass) writeParts(root *os.Root, send, view []string, bundle string) error {
	w := &partWriter{p: p}
	if err := w.next(); err != nil {
		return w.fail(err)
	}
	if err := p.addContents(w, root, send); err != nil {
		return w.fail(err)
	}
	// The control files go into part 0, which rp_apply reads first: reopen it
	// is not possible with tar, so they are written into the last part and
	// that part is moved to the front.
	hv, add, del := p.controlFiles(send, view)
	ctl := []struct {
		name string
		data []byte
	}{{"hv", hv}, {"add", add}, {"del", del}, {"guard", nulList(p.guard)}}
	for _, c := range ctl {
		if err := w.ctl(c.name, c.data); err != nil {
			return w.fail(err)
		}
	}
	if bundle != "" {
		if err := w.ctlFile("bundle", bundle); err != nil {
			return w.fail(err)
		}
	}
	if err := w.close(); err != nil {
		return w.fail(err)
	}
	if n := len(p.parts); n > 1 {
		// The last part holds the control files: make it part 0.
		last := p.parts[n-1]
		for i := n - 1; i > 0; i-- {
			p.parts[i] = p.parts[i-1]
		}
		p.parts[0] = last
	}
	return nil
}

// addContents writes the contents of send into the parts (a new part once
// one holds more than the replica's part size), recording the blob ids of
// the bytes sent in p.host and p.sent. A file gone or changing meanwhile
// is not sent (a warning; the next pass sees it again). Errors: a read or
// write failure.
func (p *Pass) addContents(w *partWriter, root *os.Root, send []string) error {
	for _, fp := range send {
		if w.bytes > p.r.partBytes {
			if err := w.close(); err != nil {
				return err
			}
			if err := w.next(); err != nil {
				return err
			}
		}
		blob, gm, err := addToTar(w.tw, root, fp)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errShort) {
				// Gone or changing: not sent now; the next pass sees it again.
				p.warnings = append(p.warnings, fmt.Sprintf("%s: %v", fp, err))
				delete(p.host, fp)
				continue
			}
			return err
		}
		hf := p.host[fp]
		hf.Blob, hf.Mode = blob, gm
		p.host[fp] = hf
		p.sent[fp] = hf.entry
		w.bytes += hf.Size + 1024
	}
	return nil
}

// controlFiles returns the control files of a pass, NUL-separated: hv, the
// host's view ("<mode> <blob>\t<path>" of each view path still on the
// host; in incremental mode a zero entry per deleted or absent path), add
// (the paths sent, or in manifest mode every view path: the working index
// tracks ignored files too) and del (the deleted paths).
func (p *Pass) controlFiles(send, view []string) (hv, add, del []byte) {
	var hvB, addB, delB bytes.Buffer
	for _, fp := range view {
		hf, ok := p.host[fp]
		if !ok {
			continue
		}
		fmt.Fprintf(&hvB, "%o %s\t%s\x00", hf.Mode, hf.Blob, fp)
	}
	added := send
	if p.mode == modeManifest {
		added = view
	}
	for _, fp := range added {
		if _, ok := p.host[fp]; ok {
			addB.WriteString(fp + "\x00")
		}
	}
	zero := strings.Repeat("0", 40)
	for _, fp := range p.deleted {
		if p.mode == modeIncr {
			fmt.Fprintf(&hvB, "0 %s\t%s\x00", zero, fp)
		}
		delB.WriteString(fp + "\x00")
	}
	if p.mode == modeIncr {
		for _, fp := range p.absent {
			fmt.Fprintf(&hvB, "0 %s\t%s\x00", zero, fp)
		}
	}
	return hvB.Bytes(), addB.Bytes(), delB.Bytes()
}

// readHead returns the workspace's HEAD commit and branch ("" when detached).
func (r *Replica) readHead(ctx context.Context) (string, string, error) {
	if r.src.GitDir == "" {
		return "", "", nil
	}
	env := []string{"GIT_DIR=" + r.src.GitDir}
	out, err := r.git.Run(ctx, gitx.Call{Dir: r.src.GitDir, Env: env, Args: []string{"rev-parse", "--verify", "-q", "HEAD^{commit}"}})
	if err != nil {
		if gitx.ExitCode(err) == 1 {
			return "", "", nil // unborn
		}
		return "", "", sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: read HEAD")
	}
	commit := strings.TrimSpace(string(out))
	ref, err := r.git.Run(ctx, gitx.Call{Dir: r.src.GitDir, Env: env, Args: []string{"symbolic-ref", "-q", "HEAD"}})
	branch := ""
	if err == nil {
		branch = strings.TrimPrefix(strings.TrimSpace(string(ref)), "refs/heads/")
	}
	if !isHex40(commit) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: HEAD is %q", sandboxapi.Clip(commit, 80))
	}
	return commit, branch, nil
}

// bundle writes a git bundle of HEAD (without what old holds, when old is a
// commit) into dir; "" when HEAD adds nothing to old.
func (r *Replica) bundle(ctx context.Context, dir, old string) (string, error) {
	env := []string{"GIT_DIR=" + r.src.GitDir}
	args := []string{"bundle", "create", "-q", filepath.Join(dir, "head.bundle"), "HEAD"}
	if old != "" {
		n, err := r.git.Run(ctx, gitx.Call{Dir: r.src.GitDir, Env: env, Args: []string{"rev-list", "--count", "HEAD", "^" + old, "--"}})
		if err != nil {
			old = "" // unknown to the host (rewritten history): a full bundle
		} else if strings.TrimSpace(string(n)) == "0" {
			return "", nil
		}
		if old != "" {
			args = append(args, "^"+old)
		}
	}
	if _, err := r.git.Run(ctx, gitx.Call{Dir: r.src.GitDir, Env: env, Args: args}); err != nil {
		return "", sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: git bundle")
	}
	return filepath.Join(dir, "head.bundle"), nil
}

// Result is the remote's answer to a pass, as files of its out directory
// (a host directory holding the downloaded copies).
type Result struct {
	// Dir is a host directory holding status, tree, seq, diff, changes.tar
	// and warnings as rp_collect wrote them (missing ones are errors).
	Dir string
}

// Outcome classifies a finished pass.
type Outcome int

// Outcomes of Finish.
const (
	// Applied: the report was applied (or was stale and dropped).
	Applied Outcome = iota
	// Resync: the remote lacks the base tree; run the pass again (Finish has
	// switched the next pass to the manifest mode).
	Resync
	// NeedGit: the replica lacks the commit; run the pass again (Finish has
	// switched the next pass to send a full bundle).
	NeedGit
)

// Status reads a result's status file: 0 ok, StatusResync, StatusNeedGit,
// another number on failure. Errors: the file is missing or malformed.
func (res Result) Status() (int, string, error) {
	b, err := os.ReadFile(filepath.Join(res.Dir, "status"))
	if err != nil {
		return 0, "", sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: the pass left no status")
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: malformed status %q", sandboxapi.Clip(string(b), 40))
	}
	msg, _ := os.ReadFile(filepath.Join(res.Dir, "error"))
	return n, strings.TrimSpace(string(msg)), nil
}

// Finish applies a pass's result on the host: every entry is validated (paths,
// types, sizes: the remote is hostile), then written through os.Root, and the
// new agreed state is recorded. Outcomes Resync and NeedGit ask the caller to
// run another pass (nothing was applied). Errors wrap
// sandboxapi.ErrRuntimeUnavailable (a malformed result, a host write failing) or
// sandboxapi.ErrResourceLimit (the report exceeds MaxReportBytes).
func (p *Pass) Finish(ctx context.Context, res Result) (Outcome, Report, error) {
	r := p.r
	code, msg, err := res.Status()
	if err != nil {
		return Applied, Report{}, err
	}
	if code != 0 {
		return p.failed(code, msg)
	}
	pr, err := res.parse()
	if err != nil {
		return Applied, Report{}, err
	}
	var rep Report
	rep.Warnings = append(rep.Warnings, p.warnings...)
	rep.Warnings = append(rep.Warnings, pr.warnings...)

	r.mu.Lock()
	defer r.mu.Unlock()
	if pr.epoch != r.st.Epoch {
		// The remote bookkeeping is new (recreated sandbox, wiped state):
		// its numbering starts again.
		r.st.Epoch, r.st.Seq = pr.epoch, 0
		p.beginSeq = 0
	}
	if pr.seq <= r.st.Seq {
		rep.Skipped = true
		return Applied, rep, nil
	}
	root, err := os.OpenRoot(r.src.WorkTree)
	if err != nil {
		return Applied, rep, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: open worktree")
	}
	defer root.Close()

	files := p.agreedFiles()
	r.st.Revert, r.st.Recheck = nil, nil
	r.st.NotSynced = pr.nested

	changes, err := validChanges(pr.recs, &rep)
	if err != nil {
		return Applied, rep, err
	}
	if r.src.ReadOnly {
		if len(changes) > 0 {
			r.st.Revert = map[string]bool{}
			for fp := range changes {
				r.st.Revert[fp] = true
			}
			rep.Reverted = len(changes)
		}
		return p.commit(pr.tree, pr.seq, rep)
	}

	// What rp_guard kept of the replica's changes; then the paths the
	// host changed while the command ran, which the replica changed too.
	now := time.Now().UTC()
	for _, c := range pr.conflicts {
		c.At = now
		rep.Conflicts = append(rep.Conflicts, c)
	}
	both := map[string]bool{}
	for fp := range changes {
		if p.hostChanged(root, fp) {
			both[fp] = true
		}
	}
	// Deletions first (a directory may replace a file), then contents.
	p.applyDeletions(root, changes, files, both, &rep)
	err = p.applyContents(ctx, root, res, changes, files, both, &rep)
	for i := range rep.Conflicts {
		if rep.Conflicts[i].At.IsZero() {
			rep.Conflicts[i].At = now
		}
	}
	r.remember(rep.Conflicts)
	if err != nil {
		// Whatever was written is recorded; the rest comes again next pass.
		_ = r.save()
		return Applied, rep, err
	}
	return p.commit(pr.tree, pr.seq, rep)
}

// failed handles a result whose status is not 0: StatusResync switches the
// next pass to the manifest mode (Resync), StatusNeedGit forgets the
// replica's git state so that the next pass sends a full bundle (NeedGit);
// any other status is the remote pass's failure (msg its error file).
// Errors: sandboxapi.ErrRuntimeUnavailable (a failed pass); the state's save.
func (p *Pass) failed(code int, msg string) (Outcome, Report, error) {
	r := p.r
	switch code {
	case StatusResync:
		r.mu.Lock()
		r.st.Mode = modeManifest
		err := r.save()
		r.mu.Unlock()
		return Resync, Report{}, err
	case StatusNeedGit:
		r.mu.Lock()
		r.st.Head, r.st.Branch = "", ""
		err := r.save()
		r.mu.Unlock()
		return NeedGit, Report{}, err
	}
	return Applied, Report{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: the remote pass failed (%d): %s", code, sandboxapi.Clip(msg, 500))
}

// parsedResult is what a successful pass's result says.
type parsedResult struct {
	tree     string // the remote's new tree (40 hex digits)
	seq      int64  // the collect's number in its epoch (> 0)
	epoch    string // the remote bookkeeping's id
	recs     []diffRecord
	warnings []string // the remote's, then one per nested repository
	nested   []string // nested repositories made in the sandbox (parseNested)
	// conflicts: what rp_guard kept of the replica's changes before
	// applying the host's (parseConflicts).
	conflicts []Conflict
}

// read reads the result file name, at most limit bytes.
// Errors: sandboxapi.ErrRuntimeUnavailable (missing, unreadable),
// sandboxapi.ErrResourceLimit (longer than limit).
func (res Result) read(name string, limit int64) ([]byte, error) {
	f, err := os.Open(filepath.Join(res.Dir, name))
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: result %s", name)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: result %s", name)
	}
	if int64(len(b)) > limit {
		return nil, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "replica: result %s exceeds %d bytes", name, limit)
	}
	return b, nil
}

// parse reads and checks the files of a successful result: tree, seq,
// diff (required), warnings, nested and epoch (optional).
// Errors: those of read; sandboxapi.ErrRuntimeUnavailable (a malformed tree,
// seq or diff).
func (res Result) parse() (parsedResult, error) {
	var pr parsedResult
	treeB, err := res.read("tree", 100)
	if err != nil {
		return pr, err
	}
	seqB, err := res.read("seq", 40)
	if err != nil {
		return pr, err
	}
	tree := strings.TrimSpace(string(treeB))
	seq, serr := strconv.ParseInt(strings.TrimSpace(string(seqB)), 10, 64)
	if !isHex40(tree) || serr != nil || seq <= 0 {
		return pr, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: malformed tree or seq in the result")
	}
	pr.tree, pr.seq = tree, seq
	diffB, err := res.read("diff", 256<<20)
	if err != nil {
		return pr, err
	}
	if pr.recs, err = parseDiff(diffB); err != nil {
		return pr, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: malformed diff")
	}
	if w, err := res.read("warnings", 64<<10); err == nil && len(bytes.TrimSpace(w)) > 0 {
		pr.warnings = append(pr.warnings, "remote: "+strings.TrimSpace(string(w)))
	}
	pr.nested = parseNested(res.read("nested", 64<<10))
	for _, n := range pr.nested {
		pr.warnings = append(pr.warnings, n+": a nested git repository made in the sandbox is not synced back (its files exist only there)")
	}
	epochB, _ := res.read("epoch", 100)
	pr.epoch = strings.TrimSpace(string(epochB))
	if pr.conflicts, err = parseConflicts(res.read("conflicts", 1<<20)); err != nil {
		return pr, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: malformed conflicts")
	}
	return pr, nil
}

// agreedFiles updates the agreed file entries with what this pass sent
// (the host files Begin sent are agreed unless the report says otherwise;
// after a full comparison the whole host view is) and returns them. Called
// with r.mu held.
func (p *Pass) agreedFiles() map[string]entry {
	files := p.r.st.Files
	for fp, e := range p.sent {
		files[fp] = e
	}
	if p.mode != modeIncr {
		// The whole view was compared: it is the agreed state now.
		for fp, hf := range p.host {
			files[fp] = hf.entry
		}
	}
	for _, fp := range p.deleted {
		delete(files, fp)
	}
	return files
}

// validChanges checks a report's diff records (the remote is hostile) and
// returns them by path: a valid path, status D, or A/M/T to a file,
// executable or symbolic link. Nested repositories (gitlinks) are left out
// with a warning in rep. Errors: sandboxapi.ErrRuntimeUnavailable naming the
// first bad record.
func validChanges(recs []diffRecord, rep *Report) (map[string]diffRecord, error) {
	changes := map[string]diffRecord{}
	for _, rec := range recs {
		if err := validPath(rec.path); err != nil {
			return nil, err
		}
		if rec.newMode == modeGitlink || rec.oldMode == modeGitlink && rec.status == 'D' {
			rep.Warnings = append(rep.Warnings, rec.path+": a nested git repository is not synced")
			continue
		}
		switch rec.status {
		case 'D':
		case 'A', 'M', 'T':
			if rec.newMode != modeFile && rec.newMode != modeExec && rec.newMode != modeSymlink {
				return nil, pathErr(rec.path, "unexpected mode "+strconv.FormatUint(uint64(rec.newMode), 8))
			}
		default:
			return nil, pathErr(rec.path, "unexpected status "+string(rec.status))
		}
		changes[rec.path] = rec
	}
	return changes, nil
}

// applyDeletions removes the deleted paths of changes from the worktree
// and from files; one that cannot be removed is a warning in rep and
// checked again next pass; one in both (changed on the host meanwhile)
// stays on the host, a conflict. Called with r.mu held.
func (p *Pass) applyDeletions(root *os.Root, changes map[string]diffRecord, files map[string]entry, both map[string]bool, rep *Report) {
	for fp, rec := range changes {
		if rec.status != 'D' {
			continue
		}
		if both[fp] {
			// The host changed it meanwhile: its version stays (and goes up
			// next pass, the agreed state having lost it).
			delete(files, fp)
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: fp})
			continue
		}
		if err := removePath(root, fp); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: not removed: %v", fp, err))
			p.r.recheck(fp)
			continue
		}
		delete(files, fp)
		rep.Deleted++
	}
}

// commit records the new agreed state. Called with r.mu held.
func (p *Pass) commit(tree string, seq int64, rep Report) (Outcome, Report, error) {
	r := p.r
	moved := r.st.Seq != p.beginSeq
	r.st.Seq = seq
	r.st.Head, r.st.Branch = p.head, p.branch
	r.st.Tree, r.st.Mode = tree, ""
	if moved {
		// Another report was applied between this pass's Begin and Finish:
		// compare the whole manifest next time.
		r.st.Mode = modeManifest
	}
	if err := r.save(); err != nil {
		return Applied, rep, err
	}
	for _, w := range rep.Warnings {
		r.log.Warn("replica sync", "worktree", r.src.WorkTree, "warning", w)
	}
	return Applied, rep, nil
}

// applyContents writes the added and modified files of a report from
// changes.tar; one in both (changed on the host meanwhile) is written
// beside the host's version (conflictCopy), a conflict, and the agreed
// state takes the replica's version without a stat signature, so that the
// next pass hashes the host's and sends it. Called with r.mu held.
func (p *Pass) applyContents(ctx context.Context, root *os.Root, res Result, changes map[string]diffRecord, files map[string]entry, both map[string]bool, rep *Report) error {
	want := 0
	for _, rec := range changes {
		if rec.status != 'D' {
			want++
		}
	}
	if want == 0 {
		return nil
	}
	f, err := os.Open(filepath.Join(res.Dir, "changes.tar"))
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: result changes.tar")
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > p.r.maxReport {
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "replica: the command's changes (%d bytes) exceed %d bytes; they stay in the sandbox", fi.Size(), p.r.maxReport)
	}
	tr := tar.NewReader(f)
	seen := map[string]bool{}
	for {
		if err := ctxErr(ctx, "apply changes"); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: malformed changes.tar")
		}
		name := strings.TrimPrefix(h.Name, "./")
		rec, ok := changes[name]
		if !ok || rec.status == 'D' || seen[name] {
			if h.Typeflag == tar.TypeDir {
				continue // a nested repository's directory (gitlink), or tar's own
			}
			return pathErr(name, "not in the pass's diff")
		}
		seen[name] = true
		if err := entryMatches(h, rec); err != nil {
			return err
		}
		if both[name] {
			cp := conflictCopy(root, name, changes)
			if cp == "" {
				// Nowhere to keep it on the host: the pass fails (its state is
				// not committed, so the next pass finds the same conflict)
				// rather than lose either version.
				return sandboxapi.Errorf(sandboxapi.ErrConflict,
					"replica: %s changed both in the workspace and in the sandbox, and no name beside it can hold the sandbox's version: rename it on one side", sandboxClip(name))
			}
			if _, _, err := writeEntry(root, cp, h, tr, rec); err != nil {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: the sandbox's version not kept at %s: %v", name, cp, err))
				p.r.recheck(name)
				continue
			}
			files[name] = entry{Mode: rec.newMode, Blob: rec.newBlob, Size: -1}
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: name, Copy: cp})
			continue
		}
		blob, gm, err := writeEntry(root, name, h, tr, rec)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: not written: %v", name, err))
			p.r.recheck(name)
			continue
		}
		fi, err := root.Lstat(name)
		if err != nil {
			continue
		}
		m, c, ino := statSig(fi)
		files[name] = entry{Mode: gm, Blob: blob, Size: fi.Size(), Mtime: m, Ctime: c, Ino: ino}
		rep.Changed++
	}
	for fp, rec := range changes {
		if rec.status != 'D' && !seen[fp] {
			// Vanished in the replica after the diff: the next pass reports it again.
			rep.Warnings = append(rep.Warnings, fp+": changed in the sandbox but not sent (changing?)")
			p.r.recheck(fp)
		}
	}
	return nil
}

// entryMatches checks a changes.tar entry against its diff record: a
// regular file (of a non-negative size) where the diff has a file or an
// executable, a symbolic link where it has one. Errors:
// sandboxapi.ErrRuntimeUnavailable naming the path.
func entryMatches(h *tar.Header, rec diffRecord) error {
	name := strings.TrimPrefix(h.Name, "./")
	switch h.Typeflag {
	case tar.TypeReg:
		if rec.newMode == modeSymlink || h.Size < 0 {
			return pathErr(name, "a file where the diff has a symbolic link")
		}
	case tar.TypeSymlink:
		if rec.newMode != modeSymlink {
			return pathErr(name, "a symbolic link where the diff has a file")
		}
	default:
		return pathErr(name, "unexpected entry type")
	}
	return nil
}

// writeEntry writes a changes.tar entry (checked by entryMatches) into the
// worktree at name: a file with the tar's permission bits but executable exactly
// when the diff says so, or a symbolic link. It returns the blob id and
// git mode written. Errors: the write's (the caller warns and rechecks).
func writeEntry(root *os.Root, name string, h *tar.Header, content io.Reader, rec diffRecord) (blob string, gitMode uint32, err error) {
	if h.Typeflag == tar.TypeSymlink {
		blob, err = writeSymlink(root, name, h.Linkname)
		return blob, modeSymlink, err
	}
	perm := fs.FileMode(h.Mode) & 0o777
	if rec.newMode == modeExec {
		perm |= 0o100
	} else {
		perm &^= 0o111
	}
	blob, err = writeFile(root, name, content, h.Size, perm)
	return blob, rec.newMode, err
}

// parseNested reads the result's "nested" file (NUL-separated directory
// paths ending in "/"; missing from results of older scripts) into at most
// MaxNotSynced valid paths.
func parseNested(b []byte, err error) []string {
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range strings.Split(string(b), "\x00") {
		if p == "" || !strings.HasSuffix(p, "/") || validPath(strings.TrimSuffix(p, "/")) != nil {
			continue
		}
		if len(out) == MaxNotSynced {
			break
		}
		out = append(out, p)
	}
	return out
}
