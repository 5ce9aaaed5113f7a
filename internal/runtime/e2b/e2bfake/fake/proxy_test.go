package fake

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An envd stream answers as soon as it has the request's message, and the
// proxy may write that answer before its request to envd checked that the
// client's body had nothing more (Go's transport reads the body once more
// after Content-Length bytes): the proxy must keep the request readable
// while it answers, else Go's server drops and closes the body, that check
// fails, the request to envd is abandoned and the stream cut (E2B's
// JavaScript SDK saw "terminated" now and then). A race: many short
// streams in a row.
func TestProxyStreamsWhileTheRequestEnds(t *testing.T) {
	srv, err := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fake E2B: %v", err)
		}
		t.Skipf("fake E2B unavailable: %v", err)
	}
	_, err = srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(srv.Close)

	req, err := http.NewRequest(http.MethodPost, srv.APIURL()+"/sandboxes", strings.NewReader(`{"templateID":"base","timeout":120}`))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", srv.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var created struct {
		SandboxID string `json:"sandboxID"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	msg := []byte(`{"process":{"cmd":"/bin/echo","args":["streamed"]}}`)
	envelope := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	envelope = append(envelope, msg...)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 100 {
		req, err := http.NewRequest(http.MethodPost, srv.APIURL()+"/process.Process/Start", bytes.NewReader(envelope))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("E2b-Sandbox-Id", created.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "49983")
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "stream %d was cut: %q", i, body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// Envelopes: flags, length, message; the last one ends the
		// stream (flag 2) without an error.
		var last []byte
		var flags byte
		for rest := body; len(rest) >= 5; {
			n := binary.BigEndian.Uint32(rest[1:5])
			require.LessOrEqual(t, int(n), len(rest)-5, "a whole envelope")
			flags, last, rest = rest[0], rest[5:5+n], rest[5+n:]
		}
		require.Equal(t, byte(2), flags, "stream %d ended: %q", i, body)
		require.NotContains(t, string(last), `"error"`)
		require.Contains(t, string(body), `"stdout":"c3RyZWFtZWQK"`, "the output, base64")
	}
}
