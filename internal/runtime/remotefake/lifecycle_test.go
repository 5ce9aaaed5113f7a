package remotefake

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLifecycleServesAndStopsTogether(t *testing.T) {
	l := NewLifecycle()
	var stopped atomic.Bool
	l.Go(func(stop <-chan struct{}) {
		<-stop
		stopped.Store(true)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "up", string(b))

	require.True(t, l.Close())
	require.True(t, stopped.Load(), "Close waits for the loops")
	_, err = http.Get("http://" + ln.Addr().String() + "/")
	require.Error(t, err, "the server is closed")
	require.False(t, l.Close(), "a second Close does nothing")
}
