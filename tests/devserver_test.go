package tests

import (
	"errors"
	"io"
	"net"
	"net/http"
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
