// Package execoutput keeps the whole output of commands whose result was
// cut, on the worker host's disk, so an agent can page through it later
// with read_output (docs/API.md "Kept output"). It is bounded: one stream
// of one command keeps at most sandboxapi.MaxKeptStreamBytes, one
// workspace at most sandboxapi.MaxKeptOutputBytes (its oldest outputs are
// dropped first). Layout: <root>/<workspace id>/<output id>.{stdout,stderr,json}.
// Output that fits in the result is never written to disk.
package execoutput

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Store is the kept output of one worker host. It is safe for concurrent use.
type Store struct {
	root string
	// maxWorkspace is the per-workspace bound (sandboxapi.MaxKeptOutputBytes).
	maxWorkspace int64
	mu           sync.Mutex // serializes pruning and removal
}

// New returns the store under root (created on first use).
func New(root string) *Store {
	return &Store{root: root, maxWorkspace: sandboxapi.MaxKeptOutputBytes}
}

// meta is an output's <id>.json: written last, so an output without it is
// incomplete and never served.
type meta struct {
	WorkspaceID string    `json:"workspace_id"`
	Created     time.Time `json:"created"`
	Total       [2]int64  `json:"total"` // stdout, stderr as the command wrote them
	Kept        [2]int64  `json:"kept"`
}

var streams = [2]string{sandboxapi.StreamStdout, sandboxapi.StreamStderr}

func streamIndex(name string) int {
	if name == sandboxapi.StreamStderr {
		return 1
	}
	return 0
}

// Keeper collects one command's output (Write from the runtime's onChunk,
// then Finish). Nothing touches the disk until a stream grows past the
// result's cap, i.e. until the result is going to be cut.
type Keeper struct {
	s        *Store
	wsID     string
	id       string
	spillAt  int64
	mu       sync.Mutex
	streams  [2]keptStream
	spilled  bool
	err      error
	finished bool
}

type keptStream struct {
	buf   bytes.Buffer // before spilling
	f     *os.File
	total int64
	kept  int64
}

// Begin starts keeping the output of one command of workspace wsID whose
// result keeps at most capBytes of each stream (ExecRequest.OutputCap()).
// Errors: ErrInvalidArgument (a malformed workspace id).
func (s *Store) Begin(wsID string, capBytes int) (*Keeper, error) {
	if err := sandboxapi.ValidateWorkspaceID(wsID); err != nil {
		return nil, err
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	return &Keeper{s: s, wsID: wsID, id: sandboxapi.OutputIDPrefix + hex.EncodeToString(rnd[:]), spillAt: int64(capBytes)}, nil
}

// Write records a piece of stream ("stdout" or "stderr"); it never fails
// (a disk error stops the keeping and is reported by Finish).
func (k *Keeper) Write(stream string, p []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := &k.streams[streamIndex(stream)]
	st.total += int64(len(p))
	if k.err != nil || k.finished {
		return
	}
	if !k.spilled && st.total <= k.spillAt {
		st.buf.Write(p)
		st.kept += int64(len(p))
		return
	}
	if !k.spilled {
		if k.err = k.spill(); k.err != nil {
			return
		}
	}
	k.append(st, p)
}

// spill creates the output's files and writes what was buffered.
func (k *Keeper) spill() error {
	dir := filepath.Join(k.s.root, k.wsID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := range k.streams {
		f, err := os.OpenFile(filepath.Join(dir, k.id+"."+streams[i]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		st := &k.streams[i]
		st.f = f
		if _, err := f.Write(st.buf.Bytes()); err != nil {
			return err
		}
		st.buf = bytes.Buffer{}
	}
	k.spilled = true
	return nil
}

func (k *Keeper) append(st *keptStream, p []byte) {
	room := sandboxapi.MaxKeptStreamBytes - st.kept
	if room <= 0 {
		return
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	if _, err := st.f.Write(p); err != nil {
		k.err = err
		return
	}
	st.kept += int64(len(p))
}

// Finish ends the keeping. When truncated (the result was cut) it completes
// the output's files and returns its id, after dropping the workspace's
// oldest outputs beyond the bound; otherwise it keeps nothing and returns
// "". Errors: the disk error that stopped the keeping (the id is then "";
// nothing partial stays).
func (k *Keeper) Finish(truncated bool) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.finished {
		return "", errors.New("execoutput: Finish called twice")
	}
	k.finished = true
	err := k.err
	if err == nil && truncated && !k.spilled {
		err = k.spill()
	}
	for i := range k.streams {
		if f := k.streams[i].f; f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if !truncated || err != nil {
		if k.spilled {
			k.s.remove(k.wsID, k.id)
		}
		if err != nil {
			return "", sandboxapi.Wrap(sandboxapi.ErrInsufficientDisk, err, "keep the output")
		}
		return "", nil
	}
	m := meta{WorkspaceID: k.wsID, Created: time.Now().UTC()}
	for i, st := range k.streams {
		m.Total[i], m.Kept[i] = st.total, st.kept
	}
	data, _ := json.Marshal(m)
	path := filepath.Join(k.s.root, k.wsID, k.id+".json")
	err = os.WriteFile(path+".tmp", data, 0o600)
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		k.s.remove(k.wsID, k.id)
		return "", sandboxapi.Wrap(sandboxapi.ErrInsufficientDisk, err, "keep the output")
	}
	k.s.prune(k.wsID, k.id)
	return k.id, nil
}

// remove deletes one output's files (best effort).
func (s *Store) remove(wsID, id string) {
	dir := filepath.Join(s.root, wsID)
	for _, ext := range []string{".json", ".stdout", ".stderr", ".json.tmp"} {
		_ = os.Remove(filepath.Join(dir, id+ext))
	}
}

// prune drops the oldest outputs of wsID (never keep) until its kept bytes
// are within the bound.
func (s *Store) prune(wsID, keep string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.root, wsID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type out struct {
		id      string
		created time.Time
		bytes   int64
	}
	var outs []out
	var total int64
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || sandboxapi.ValidateOutputID(id) != nil {
			continue
		}
		var m meta
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || json.Unmarshal(data, &m) != nil {
			continue
		}
		o := out{id: id, created: m.Created, bytes: m.Kept[0] + m.Kept[1]}
		outs = append(outs, o)
		total += o.bytes
	}
	slices.SortFunc(outs, func(a, b out) int { return a.created.Compare(b.created) })
	for _, o := range outs {
		if total <= s.maxWorkspace {
			break
		}
		if o.id == keep {
			continue
		}
		s.remove(wsID, o.id)
		total -= o.bytes
	}
}

// Read returns a page of a kept output (sandboxapi.ReadOutputInput; Limit 0
// = DefaultReadOutputBytes). Errors: ErrInvalidArgument (malformed ids,
// stream, offset or limit), ErrNotFound (no such output: never kept, or
// dropped as the workspace's oldest), ErrWorkspaceUnavailable (a disk error).
func (s *Store) Read(wsID string, in sandboxapi.ReadOutputInput) (sandboxapi.ReadOutputResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(wsID); err != nil {
		return sandboxapi.ReadOutputResult{}, err
	}
	if err := in.Validate(); err != nil {
		return sandboxapi.ReadOutputResult{}, err
	}
	stream := in.Stream
	if stream == "" {
		stream = sandboxapi.StreamStdout
	}
	limit := in.Limit
	if limit == 0 {
		limit = sandboxapi.DefaultReadOutputBytes
	}
	dir := filepath.Join(s.root, wsID)
	data, err := os.ReadFile(filepath.Join(dir, in.OutputID+".json"))
	var m meta
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil || m.WorkspaceID != wsID {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return sandboxapi.ReadOutputResult{}, sandboxapi.Errorf(sandboxapi.ErrNotFound,
				"output %s is not kept by workspace %s (never kept, or dropped: a workspace keeps at most %d MiB of output, oldest first)",
				in.OutputID, wsID, sandboxapi.MaxKeptOutputBytes>>20)
		}
		return sandboxapi.ReadOutputResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "read output %s: %v", in.OutputID, err)
	}
	i := streamIndex(stream)
	res := sandboxapi.ReadOutputResult{OutputID: in.OutputID, Stream: stream, Offset: in.Offset, Total: m.Total[i], Kept: m.Kept[i], Data: []byte{}}
	if in.Offset >= m.Kept[i] {
		res.EOF = true
		return res, nil
	}
	f, err := os.Open(filepath.Join(dir, in.OutputID+"."+stream))
	if err != nil {
		return sandboxapi.ReadOutputResult{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "output %s (%s) is no longer kept", in.OutputID, stream)
	}
	defer f.Close()
	n := min(int64(limit), m.Kept[i]-in.Offset)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, in.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return sandboxapi.ReadOutputResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "read output %s: %v", in.OutputID, err)
	}
	res.Data = buf[:got]
	res.EOF = in.Offset+int64(got) >= m.Kept[i]
	return res, nil
}

// RemoveWorkspace deletes every kept output of wsID (a workspace that is
// evicted or removed). A workspace with none is success.
func (s *Store) RemoveWorkspace(wsID string) error {
	if err := sandboxapi.ValidateWorkspaceID(wsID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(s.root, wsID)); err != nil {
		return fmt.Errorf("remove kept output of %s: %w", wsID, err)
	}
	return nil
}
