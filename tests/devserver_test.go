package tests

import (
	"database/sql"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/devserver"
)

// TestEmbeddedServerPorts: the embedded Temporal (what `make run` starts)
// listens on the ports it is given (SANDBOX_TEMPORAL_PORT, SANDBOX_UI_PORT),
// serves the Web UI there, and refuses a taken port with ErrPortInUse naming
// the variable to change, before starting anything.
func TestEmbeddedServerPorts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	_, err = devserver.Start(devserver.Options{Port: takenPort})
	require.True(t, errors.Is(err, devserver.ErrPortInUse), "%v", err)
	assert.Contains(t, err.Error(), "SANDBOX_TEMPORAL_PORT")
	assert.Contains(t, err.Error(), strconv.Itoa(takenPort))

	free, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	_, err = devserver.Start(devserver.Options{Port: free, UIPort: takenPort})
	require.True(t, errors.Is(err, devserver.ErrPortInUse), "%v", err)
	assert.Contains(t, err.Error(), "SANDBOX_UI_PORT")

	uiPort, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	srv, err := devserver.Start(devserver.Options{Port: free, UIPort: uiPort})
	require.NoError(t, err)
	defer srv.Stop()
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(free), srv.Address)
	assert.Equal(t, "http://127.0.0.1:"+strconv.Itoa(uiPort), srv.UIURL)
	c, err := net.DialTimeout("tcp", srv.Address, 5*time.Second)
	require.NoError(t, err, "the frontend listens on the given port")
	_ = c.Close()

	var status int
	var body string
	require.Eventually(t, func() bool { // the UI server starts in the background
		resp, err := http.Get(srv.UIURL + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		status, body = resp.StatusCode, string(b)
		return true
	}, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, strings.Contains(strings.ToLower(body), "<html"), "the Web UI serves its page")
}

// TestEmbeddedServerDatabaseIsWAL: the embedded server's SQLite file (what
// `make run` keeps under SANDBOX_DATA_DIR) is in WAL mode, as
// internal/devserver configures it (docs/BENCHMARKS.md "Scale"). The journal
// mode is stored in the file, so any connection reads it back; the settings
// used to be passed under names SQLite does not know, which it ignores, and
// the file stayed in rollback-journal mode, paying an fsync per commit.
func TestEmbeddedServerDatabaseIsWAL(t *testing.T) {
	port, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "temporal.db")
	srv, err := devserver.Start(devserver.Options{Port: port, DatabaseFile: file})
	require.NoError(t, err)
	defer srv.Stop()
	db, err := sql.Open("sqlite", file)
	require.NoError(t, err)
	defer db.Close()
	var mode string
	require.NoError(t, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode)
}

// TestEmbeddedServerPortTakenAfterTheCheck: two embedded servers started at
// once on the same frontend port both pass the port check; the one that
// loses the bind must fail with ErrPortInUse and leave the process alive
// (Temporal's logger calls Fatal there, which used to be os.Exit: it ended
// the whole test binary, and the worker). The winner keeps serving.
func TestEmbeddedServerPortTakenAfterTheCheck(t *testing.T) {
	for round := 0; round < 2; round++ {
		port, err := devserver.FreePort("127.0.0.1")
		require.NoError(t, err)
		type res struct {
			srv *devserver.Server
			err error
		}
		out := make(chan res, 2)
		for i := 0; i < 2; i++ {
			go func() {
				srv, err := devserver.Start(devserver.Options{Port: port})
				out <- res{srv, err}
			}()
		}
		a, b := <-out, <-out
		if a.err == nil && b.err == nil {
			a.srv.Stop()
			b.srv.Stop()
			t.Fatalf("round %d: two servers started on port %d", round, port)
		}
		winner, loser := a, b
		if a.err != nil {
			winner, loser = b, a
		}
		require.Error(t, loser.err)
		t.Logf("round %d: the second server failed with: %v", round, loser.err)
		assert.True(t, errors.Is(loser.err, devserver.ErrPortInUse), "round %d: %v", round, loser.err)
		if winner.err != nil {
			t.Fatalf("round %d: neither server started: %v / %v", round, a.err, b.err)
		}
		c, err := net.DialTimeout("tcp", winner.srv.Address, 5*time.Second)
		require.NoError(t, err, "the winner serves")
		_ = c.Close()
		winner.srv.Stop()
	}
}
