package mcpauth

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The revocation list of the multi-workspace endpoint is a text file
// (`sandboxctl mcp --multi --revoked-file FILE`, written by `sandboxctl mcp
// revoke`, docs/SECURITY.md "The MCP server"): one revoked token per line,
//
//	<token id> <expiry>
//
// the token id TokenIDLen lowercase hex digits and the expiry Unix seconds
// (as in a token: decimal, no sign, no leading zero, at most 12 digits),
// fields separated by spaces or tabs; empty lines and lines whose first
// field starts with '#' are ignored. Anything else makes the whole file
// corrupt (ParseRevocations). An entry revokes its id while now < expiry:
// past it the token has expired anyway, and Revoke drops the entry.

// MaxRevocationFileSize bounds a revocation file, in bytes (about 150,000
// entries; Revoke prunes expired ones, so a list holds only the tokens
// revoked within the last MaxTTL).
const MaxRevocationFileSize = 8 << 20

// revocationHeader starts every file Revoke writes.
const revocationHeader = "# sandboxcore MCP token revocations (sandboxctl mcp revoke): <token id> <expiry, Unix seconds>\n"

// lockWait is how often Revoke tries the lock file again while another
// revoker holds it.
const lockWait = 20 * time.Millisecond

// Revocation is one entry of a revocation list: the token id it revokes
// and when the entry may go (the token's expiry, or later).
type Revocation struct {
	// TokenID is the revoked token's id (Claims.TokenID).
	TokenID string
	// Expiry is when the entry ends, whole seconds: the token's expiry
	// (Claims.Expiry), or any later instant.
	Expiry time.Time
}

// ParseRevocations reads the content of a revocation file (the format
// above). Errors (plain, naming the line): a line that is not a comment, an
// empty line or "<token id> <expiry>", or content larger than
// MaxRevocationFileSize.
func ParseRevocations(data []byte) ([]Revocation, error) {
	if len(data) > MaxRevocationFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxRevocationFileSize)
	}
	var out []Revocation
	for n, line := range strings.Split(string(data), "\n") {
		f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' })
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 || !idPattern.MatchString(f[0]) || !expiryPattern.MatchString(f[1]) {
			return nil, fmt.Errorf("line %d: want <token id: %d lowercase hex digits> <expiry: Unix seconds>, or a # comment", n+1, TokenIDLen)
		}
		exp, _ := strconv.ParseInt(f[1], 10, 64) // 12 digits at most
		out = append(out, Revocation{TokenID: f[0], Expiry: time.Unix(exp, 0)})
	}
	return out, nil
}

// FormatRevocations is the content Revoke writes for entries: a comment
// line, then one "<token id> <expiry>" line per entry in the order given.
func FormatRevocations(entries []Revocation) []byte {
	var b bytes.Buffer
	b.WriteString(revocationHeader)
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %d\n", e.TokenID, e.Expiry.Unix())
	}
	return b.Bytes()
}

// ReadRevocations reads the revocation file at path. A missing file is an
// empty list (nil, nil): nothing is revoked. Errors: InvalidArgument naming
// the file for one that cannot be read, is not a regular file, is larger
// than MaxRevocationFileSize or is corrupt (ParseRevocations).
func ReadRevocations(path string) ([]Revocation, error) {
	f, err := openList(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file: %v", err)
	}
	defer f.Close()
	entries, _, err := readOpen(f, path)
	return entries, err
}

// readOpen reads the open revocation file f (at path) and returns its
// entries and what it was read from. Errors: as ReadRevocations.
func readOpen(f *os.File, path string) ([]Revocation, os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRevocationFileSize+1))
	if err != nil {
		return nil, fi, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file %s: %v", path, err)
	}
	entries, err := ParseRevocations(data)
	if err != nil {
		return nil, fi, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file %s is corrupt: %v", path, err)
	}
	return entries, fi, nil
}

// Revoke adds entries to the revocation file at path (created when
// missing) and returns the number of entries the file then holds. Under an
// exclusive flock(2) of path + ".lock" (created mode 0600, never removed;
// waited for until ctx ends), it reads the file, merges entries in (an id
// listed twice keeps its later expiry), drops every entry whose expiry is
// at or before now (those tokens have expired: the list stays bounded) and
// replaces the file atomically: a temporary file in the same directory,
// mode 0600, written, synced and renamed over path, then the directory
// synced. A reader (RevocationList) sees the old list or the new one,
// never a mix. Errors: InvalidArgument for an entry whose token id is
// malformed or whose expiry is outside 1 … 999999999999 Unix seconds, and
// for an existing file that is corrupt or unreadable (it is left as it
// is: fix or remove it first); a plain error when the lock, the temporary
// file or the rename fails (wrapping ctx's error when it ended while
// waiting for the lock).
func Revoke(ctx context.Context, path string, entries []Revocation, now time.Time) (int, error) {
	for _, e := range entries {
		if err := ValidateTokenID(e.TokenID); err != nil {
			return 0, err
		}
		if exp := e.Expiry.Unix(); exp < 1 || exp > 999_999_999_999 {
			return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation expiry %d: want Unix seconds from 1 to 999999999999", exp)
		}
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		// A symbolic link would be replaced by the new file, not the file
		// it names (which an endpoint may read); a FIFO would block.
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file %s is not a regular file (a symbolic link? give the file itself)", path)
	}
	lock := flock.New(path+".lock", flock.SetPermissions(0o600))
	ok, err := lock.TryLockContext(ctx, lockWait)
	if !ok || err != nil {
		if err == nil {
			err = ctx.Err()
		}
		return 0, fmt.Errorf("lock the revocation file %s: %w", path, err)
	}
	defer func() { _ = lock.Unlock() }()

	old, err := ReadRevocations(path)
	if err != nil {
		return 0, err
	}
	until := map[string]int64{}
	for _, e := range slices.Concat(old, entries) {
		if exp := e.Expiry.Unix(); exp > until[e.TokenID] {
			until[e.TokenID] = exp
		}
	}
	kept := make([]Revocation, 0, len(until))
	for id, exp := range until {
		if exp > now.Unix() {
			kept = append(kept, Revocation{TokenID: id, Expiry: time.Unix(exp, 0)})
		}
	}
	slices.SortFunc(kept, func(a, b Revocation) int {
		return cmp.Or(a.Expiry.Compare(b.Expiry), strings.Compare(a.TokenID, b.TokenID))
	})
	if err := writeAtomic(path, FormatRevocations(kept)); err != nil {
		return 0, err
	}
	return len(kept), nil
}

// writeAtomic replaces the file at path with data: a temporary file in the
// same directory (mode 0600), synced, renamed over path, then the
// directory synced. Errors: plain, naming path; the temporary file is
// removed.
func writeAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write the revocation file %s: %v", path, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write the revocation file %s: %v", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write the revocation file %s: %v", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write the revocation file %s: %v", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the revocation file %s: %v", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		done = true
		return fmt.Errorf("replace the revocation file %s: %v", path, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename is durable once the directory is
		_ = d.Close()
	}
	return nil
}

// RevocationList is the endpoint's live view of a revocation file: Revoked
// answers from the list last read, and first reads the file again when it
// changed (os.Stat per call: another file, size or modification time).
// Revoke always writes a new file, and the list keeps the file it last read
// open so that its inode number cannot be reused by the next one: every
// revocation is seen by the next request. Safe for concurrent use.
//
// Failures once running keep the last good list (nothing revoked is ever
// let through because of a bad write) and are logged at Error once per
// change of the file: a corrupt or unreadable file, or a file removed
// (write an empty file, not none, to clear the list while running).
type RevocationList struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	ids     map[string]int64 // token id → expiry, Unix seconds
	held    *os.File         // the file read last, kept open (see above); nil: none
	read    os.FileInfo      // held's, what ids or the last failure was read from; nil: none
	missing bool             // the file was missing at the last look
	failure string           // the last failure logged ("" = none since the last good read)
}

// OpenRevocationList reads the revocation file at path for Require. A
// missing file is an empty list (nothing revoked) whose later creation is
// followed. log (nil: discarded) gets the reloads (Info) and the failures
// once running (Error). Errors, so that an endpoint never starts without
// the list it was given: InvalidArgument naming the file when it cannot be
// read or is corrupt (ReadRevocations).
func OpenRevocationList(path string, log *slog.Logger) (*RevocationList, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &RevocationList{path: path, log: log, ids: map[string]int64{}}
	f, err := openList(path)
	if errors.Is(err, fs.ErrNotExist) {
		l.missing = true
		return l, nil
	} else if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "revocation file: %v", err)
	}
	entries, fi, err := readOpen(f, path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	l.set(entries)
	l.hold(f, fi)
	return l, nil
}

// Close releases the file the list keeps open; Revoked still answers
// after it, from the file as it then is.
func (l *RevocationList) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold(nil, nil)
	return nil
}

// Path is the file the list follows.
func (l *RevocationList) Path() string { return l.path }

// Len is the number of entries of the list last read, expired ones
// included until the file is written again.
func (l *RevocationList) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// Revoked reports whether the list names tokenID with an entry that has
// not ended at now, after reading the file again if it changed. A v1
// token's empty id is never revoked.
func (l *RevocationList) Revoked(tokenID string, now time.Time) bool {
	if tokenID == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refresh()
	exp, ok := l.ids[tokenID]
	return ok && now.Unix() < exp
}

// set makes entries the list (l.mu held or l new).
func (l *RevocationList) set(entries []Revocation) {
	ids := make(map[string]int64, len(entries))
	for _, e := range entries {
		if exp := e.Expiry.Unix(); exp > ids[e.TokenID] {
			ids[e.TokenID] = exp
		}
	}
	l.ids, l.missing, l.failure = ids, false, ""
}

// hold keeps f (whose FileInfo is fi; nil: none) as the file read last,
// closing the one held before (l.mu held or l new).
func (l *RevocationList) hold(f *os.File, fi os.FileInfo) {
	if l.held != nil && l.held != f {
		_ = l.held.Close()
	}
	l.held, l.read = f, fi
}

// refresh reads the file again when it is not what the list was last read
// from (l.mu held).
func (l *RevocationList) refresh() {
	fi, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !l.missing {
			l.missing = true
			l.hold(nil, nil)
			l.fail(fmt.Sprintf("the revocation file %s was removed", l.path))
		}
		return
	case err != nil:
		l.hold(nil, nil)
		l.fail(fmt.Sprintf("revocation file: %v", err))
		return
	}
	if l.read != nil && os.SameFile(l.read, fi) && l.read.Size() == fi.Size() && l.read.ModTime().Equal(fi.ModTime()) {
		return
	}
	l.missing = false
	f, err := openList(l.path)
	if err != nil {
		l.hold(nil, nil)
		l.fail(fmt.Sprintf("revocation file: %v", err))
		return
	}
	entries, read, err := readOpen(f, l.path)
	if err != nil {
		if read != nil {
			l.hold(f, read) // not read again until it changes
		} else {
			_ = f.Close()
			l.hold(nil, nil)
		}
		l.fail(sandboxapi.Message(err))
		return
	}
	before := len(l.ids)
	l.set(entries)
	l.hold(f, read)
	l.log.Info("mcp: revocation list read", "path", l.path, "entries", len(l.ids), "before", before)
}

// fail logs msg at Error unless it is the failure logged last.
func (l *RevocationList) fail(msg string) {
	if msg == l.failure {
		return
	}
	l.failure = msg
	l.log.Error("mcp: keeping the last good revocation list", "path", l.path, "entries", len(l.ids), "error", msg)
}

// openList opens a revocation file for reading without blocking on what
// is not a regular file (a FIFO put at its path): readOpen then refuses it.
func openList(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
