package mcpauth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestParseRevocations(t *testing.T) {
	got, err := ParseRevocations([]byte("# a comment\n\n" + idA + " 1767229200\r\n\t" + idB + "\t999999999999  \n  # indented comment\n" + idC + " 1"))
	require.NoError(t, err)
	assert.Equal(t, []Revocation{{idA, time.Unix(1767229200, 0)}, {idB, time.Unix(999_999_999_999, 0)}, {idC, time.Unix(1, 0)}}, got)
	for _, data := range []string{
		"", "\n\n", "# only comments\n",
	} {
		got, err := ParseRevocations([]byte(data))
		require.NoError(t, err, "%q", data)
		assert.Empty(t, got)
	}
	for name, data := range map[string]string{
		"one field":          idA + "\n",
		"three fields":       idA + " 1767229200 ws-0123456789abcdef01234567\n",
		"upper-case id":      strings.ToUpper(idA) + " 1767229200\n",
		"short id":           idA[:31] + " 1767229200\n",
		"a token, not an id": "v2." + wsA + ".1767229200." + idA + ".x 1767229200\n",
		"a leading zero":     idA + " 01767229200\n",
		"negative":           idA + " -1\n",
		"zero":               idA + " 0\n",
		"thirteen digits":    idA + " 1000000000000\n",
		"RFC 3339":           idA + " 2026-01-01T00:00:00Z\n",
		"a key file":         "c2FuZGJveGNvcmUtbWNwLXRlc3Qta2V5LW5vdC1hLXNlY3JldC0wMDAx\n",
		"a trailing comment": idA + " 1767229200 # why\n",
		"too large":          strings.Repeat("#", MaxRevocationFileSize+1),
	} {
		_, err := ParseRevocations([]byte(data))
		assert.Error(t, err, name)
	}
	// What FormatRevocations writes, ParseRevocations reads back.
	in := []Revocation{{idB, time.Unix(t0, 0)}, {idA, time.Unix(t0+1, 0)}}
	got, err = ParseRevocations(FormatRevocations(in))
	require.NoError(t, err)
	assert.Equal(t, in, got)
}

// TestRevokeWritesAtomicallyAndPrunes: Revoke creates the file mode 0600,
// merges (an id listed twice keeps its later expiry), drops the entries
// whose expiry has passed, leaves no temporary file, and refuses to touch a
// corrupt file or to write a malformed entry.
func TestRevokeWritesAtomicallyAndPrunes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "revoked")
	now := time.Unix(t0, 0)

	n, err := Revoke(ctx, path, []Revocation{{idA, now.Add(time.Hour)}, {idB, now.Add(time.Minute)}}, now)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "# "), "a comment says what the file is: %q", data)
	assert.Equal(t, FormatRevocations([]Revocation{{idB, now.Add(time.Minute)}, {idA, now.Add(time.Hour)}}), data, "sorted by expiry")

	// Two minutes on: B's entry has ended and goes; A's id again, with an
	// earlier expiry, keeps its later one; C is added.
	later := now.Add(2 * time.Minute)
	n, err = Revoke(ctx, path, []Revocation{{idA, now.Add(30 * time.Minute)}, {idC, now.Add(2 * time.Hour)}}, later)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	got, err := ReadRevocations(path)
	require.NoError(t, err)
	assert.Equal(t, []Revocation{{idA, now.Add(time.Hour)}, {idC, now.Add(2 * time.Hour)}}, got)

	// Revoking nothing prunes: three hours on, the list is empty.
	n, err = Revoke(ctx, path, nil, now.Add(3*time.Hour))
	require.NoError(t, err)
	assert.Zero(t, n)
	got, err = ReadRevocations(path)
	require.NoError(t, err)
	assert.Empty(t, got)
	// An entry that has already ended is not written at all.
	n, err = Revoke(ctx, path, []Revocation{{idA, now}}, now)
	require.NoError(t, err)
	assert.Zero(t, n)

	for _, e := range []Revocation{{"", now.Add(time.Hour)}, {strings.ToUpper(idA), now.Add(time.Hour)}, {idA, time.Unix(0, 0)}, {idA, time.Unix(1_000_000_000_000, 0)}} {
		_, err := Revoke(ctx, path, []Revocation{e}, now)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "%+v: %v", e, err)
	}

	corrupt := []byte("not a revocation list\n")
	require.NoError(t, os.WriteFile(path, corrupt, 0o600))
	_, err = Revoke(ctx, path, []Revocation{{idA, now.Add(time.Hour)}}, now)
	require.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	assert.Contains(t, err.Error(), "corrupt")
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, corrupt, data, "a corrupt file is left as it is")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"revoked", "revoked.lock"}, names, "no temporary file is left")
}

// TestRevokeConcurrent: revokers in parallel (the lock file) lose no entry.
func TestRevokeConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revoked")
	now := time.Now()
	var wg sync.WaitGroup
	ids := make([]string, 24)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032x", i+1)
		wg.Go(func() {
			_, err := Revoke(context.Background(), path, []Revocation{{ids[i], now.Add(time.Hour)}}, now)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := ReadRevocations(path)
	require.NoError(t, err)
	var seen []string
	for _, e := range got {
		seen = append(seen, e.TokenID)
	}
	assert.ElementsMatch(t, ids, seen)
}

// TestRevokeWaitsForTheLock: while another holds the lock, Revoke waits
// until its context ends.
func TestRevokeWaitsForTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revoked")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unlock := holdLock(t, path+".lock")
	tctx, tcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer tcancel()
	_, err := Revoke(tctx, path, []Revocation{{idA, time.Now().Add(time.Hour)}}, time.Now())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	unlock()
	_, err = Revoke(ctx, path, []Revocation{{idA, time.Now().Add(time.Hour)}}, time.Now())
	require.NoError(t, err)
}

// requireServer is Require of k with revoked in front of a handler that
// answers 200, as an httptest server; get sends one request with token.
func requireServer(t *testing.T, k *Key, revoked *RevocationList) func(token string) *http.Response {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp/{ws}", k.Require(func(r *http.Request) string { return r.PathValue("ws") }, revoked, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}), nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return func(token string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp/"+wsA, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}
}

// TestRequireRefusesRevokedTokens: over real HTTP, a revoked token is
// answered 401 invalid_token from the next request on, as an expired one,
// while a sibling token of the same workspace and a v1 token still pass;
// clearing the list lets the token through again. No restart: the list
// follows the file.
func TestRequireRefusesRevokedTokens(t *testing.T) {
	k := testKeyT(t)
	path := filepath.Join(t.TempDir(), "revoked")
	list, err := OpenRevocationList(path, nil) // missing: nothing revoked
	require.NoError(t, err)
	t.Cleanup(func() { _ = list.Close() })
	get := requireServer(t, k, list)
	now := time.Now()
	tok1, c1, err := k.Mint(wsA, time.Hour, now)
	require.NoError(t, err)
	tok2, _, err := k.Mint(wsA, time.Hour, now)
	require.NoError(t, err)
	v1 := signV1(k, wsA, now.Add(time.Hour).Unix())
	for _, tok := range []string{tok1, tok2, v1} {
		assert.Equal(t, 200, get(tok).StatusCode)
	}

	_, err = Revoke(context.Background(), path, []Revocation{{c1.TokenID, c1.Expiry}}, now)
	require.NoError(t, err)
	res := get(tok1)
	assert.Equal(t, 401, res.StatusCode)
	assert.Equal(t, `Bearer realm="sandboxcore", error="invalid_token", error_description="the token was revoked"`, res.Header.Get("WWW-Authenticate"))
	assert.Equal(t, 200, get(tok2).StatusCode, "the sibling token of the same workspace still works")
	assert.Equal(t, 200, get(v1).StatusCode, "a v1 token has no id to revoke")
	assert.True(t, list.Revoked(c1.TokenID, now))
	assert.False(t, list.Revoked(c1.TokenID, c1.Expiry), "an entry ends at its expiry")

	// Cleared by hand (an empty file): the token passes again.
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	assert.Equal(t, 200, get(tok1).StatusCode)
}

// TestRevocationListFailsClosed: a corrupt or unreadable file stops the
// endpoint at start-up; once running, a corrupt, removed or unreadable file
// keeps the last good list (the revoked token stays refused) and is logged
// once, and a good file is read again.
func TestRevocationListFailsClosed(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt")
	require.NoError(t, os.WriteFile(corrupt, []byte(idA+" soon\n"), 0o600))
	_, err := OpenRevocationList(corrupt, nil)
	require.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	assert.Contains(t, err.Error(), corrupt)
	assert.Contains(t, err.Error(), "line 1")
	_, err = OpenRevocationList(dir, nil)
	assert.True(t, sandboxapi.IsInvalidArgument(err), "a directory: %v", err)
	if os.Geteuid() != 0 { // root reads a mode 0000 file
		unreadable := filepath.Join(dir, "unreadable")
		require.NoError(t, os.WriteFile(unreadable, nil, 0o000))
		_, err = OpenRevocationList(unreadable, nil)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "unreadable: %v", err)
	}

	var logs bytes.Buffer
	path := filepath.Join(dir, "revoked")
	now := time.Now()
	_, err = Revoke(context.Background(), path, []Revocation{{idA, now.Add(time.Hour)}}, now)
	require.NoError(t, err)
	list, err := OpenRevocationList(path, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	require.True(t, list.Revoked(idA, now))

	for name, spoil := range map[string]func(){
		"corrupt": func() { require.NoError(t, os.WriteFile(path, []byte(idB+"\n"), 0o600)) },
		"removed": func() { require.NoError(t, os.Remove(path)) },
		"a directory": func() {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o700))
		},
	} {
		logs.Reset()
		spoil()
		for range 3 {
			assert.True(t, list.Revoked(idA, now), "%s: the last good list is kept", name)
			assert.False(t, list.Revoked(idB, now), name)
		}
		assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "%s: logged once: %s", name, logs.String())
		assert.Contains(t, logs.String(), "keeping the last good revocation list", name)
		require.NoError(t, os.RemoveAll(path))
		_, err = Revoke(context.Background(), path, []Revocation{{idA, now.Add(time.Hour)}}, now)
		require.NoError(t, err)
		assert.True(t, list.Revoked(idA, now))
	}

	// A good file replacing it is read: B revoked, A no longer.
	logs.Reset()
	require.NoError(t, os.WriteFile(path, FormatRevocations([]Revocation{{idB, now.Add(time.Hour)}}), 0o600))
	assert.True(t, list.Revoked(idB, now))
	assert.False(t, list.Revoked(idA, now))
	assert.Equal(t, 1, list.Len())
	assert.NotContains(t, logs.String(), "level=ERROR")
}

// TestRevocationListFollowsQuickRewrites: Revoke replaces the file (a new
// inode), so two writes within one modification-time tick of the same size
// are both seen.
func TestRevocationListFollowsQuickRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revoked")
	now := time.Now()
	list, err := OpenRevocationList(path, nil)
	require.NoError(t, err)
	for i := range 20 {
		id := fmt.Sprintf("%032x", i+1)
		require.NoError(t, os.WriteFile(path+".new", FormatRevocations([]Revocation{{id, now.Add(time.Hour)}}), 0o600))
		fi, err := os.Stat(path + ".new")
		require.NoError(t, err)
		require.NoError(t, os.Chtimes(path+".new", fi.ModTime(), time.Unix(t0, 0))) // one mtime for all
		require.NoError(t, os.Rename(path+".new", path))
		assert.True(t, list.Revoked(id, now), "write %d", i)
	}
}

// holdLock takes an exclusive flock of path, as another revoker would,
// until unlock is called.
func holdLock(t *testing.T, path string) (unlock func()) {
	t.Helper()
	l := flock.New(path)
	ok, err := l.TryLock()
	require.NoError(t, err)
	require.True(t, ok)
	return func() { _ = l.Unlock() }
}

// A FIFO or a symbolic link at the revocation path: revoking refuses it at
// once, and reading it never blocks.
func TestRevocationFileThatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	real := filepath.Join(dir, "real")
	require.NoError(t, os.WriteFile(real, nil, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	e := []Revocation{{TokenID: strings.Repeat("a", TokenIDLen), Expiry: time.Now().Add(time.Hour)}}
	for _, p := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() { _, err := Revoke(context.Background(), p, e, time.Now()); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Revoke blocks", p)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := ReadRevocations(fifo); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocks")
	}
	b, err := os.ReadFile(real)
	require.NoError(t, err)
	require.Empty(t, b, "the file behind the link is untouched")
}
