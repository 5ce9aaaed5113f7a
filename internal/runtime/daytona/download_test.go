package daytona

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	toolbox "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestDownloadIsStreamedToDisk: the toolbox streams GET /files/download
// (c.File, apps/daemon/pkg/toolbox/fs/download_file.go:27-69 of daytonaio/daytona
// v0.190.0); the adapter writes it to the file as it comes, so a download
// of 256 MiB allocates a few MiB, not the file — the generated client read
// the whole body into memory (api_file_system.go:508 of
// toolbox-api-client-go v0.190.0) — and one past its limit stops there.
func TestDownloadIsStreamedToDisk(t *testing.T) {
	const size = 256 << 20
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	var served atomic.Int64
	tbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sb-1/files/download" || r.URL.Query().Get("path") != "/result.tar" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"statusCode":404,"message":"file not found","code":"NOT_FOUND","timestamp":"2026-01-01T00:00:00Z","path":"/files/download","method":"GET"}`))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			served.Add(int64(len(chunk)))
		}
	}))
	t.Cleanup(tbSrv.Close)
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	p, err := New(Options{APIURL: tbSrv.URL + "/api", APIKey: "dtn_test_key", Deployment: "test-host", StateDir: t.TempDir(), Git: git})
	require.NoError(t, err)
	r := p.runtimeFor("rt-stream")
	cfg := toolbox.NewConfiguration()
	cfg.Servers = toolbox.ServerConfigurations{{URL: tbSrv.URL + "/sb-1"}}
	cfg.HTTPClient = p.hc
	r.mu.Lock()
	r.tb, r.sbID = toolbox.NewAPIClient(cfg), "sb-1"
	r.mu.Unlock()
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "result.tar")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.NoError(t, r.download(ctx, "/result.tar", local, 2<<30))
	runtime.ReadMemStats(&after)
	st, err := os.Stat(local)
	require.NoError(t, err)
	require.Equal(t, int64(size), st.Size())
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d MiB download allocated %.1f MiB", size>>20, float64(allocated)/(1<<20))
	require.Less(t, allocated, uint64(16<<20), "the download was held in memory")

	// Past the limit: refused, and the transfer stops there.
	served.Store(0)
	err = r.download(ctx, "/result.tar", local, 8<<20)
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.Less(t, served.Load(), int64(size), "the rest is not read")
	// A refusal keeps its kind and the toolbox's message.
	err = r.download(ctx, "/missing", local, 1<<20)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.True(t, strings.Contains(err.Error(), "file not found"), err.Error())
}
