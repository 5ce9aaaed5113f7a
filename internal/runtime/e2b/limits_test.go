package e2b

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The E2B sources the answers below are quoted from: e2b-dev/infra at
// 54693ff353d26c5fe1951db5467e751f3e2f984e.

// answer maps one E2B answer as the adapter does.
func answer(t *testing.T, status int, header map[string]string, body string) error {
	t.Helper()
	p := &Provider{opts: Options{APIKey: "e2b_test_key"}}
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
	for k, v := range header {
		resp.Header.Set(k, v)
	}
	return p.mapHTTP(context.Background(), resp, []byte(body), nil, "create sandbox")
}

// TestRateLimitAnswersAreRetryable: E2B's rate limits are passing refusals
// the Retrier waits out, its concurrency cap a quota.
func TestRateLimitAnswersAreRetryable(t *testing.T) {
	// The API's rate limiter: packages/api/internal/middleware/ratelimit/
	// ratelimit.go:126-129 (RateLimit-* headers), 137-139 (Retry-After, whole
	// seconds, at least 1) and 146-149 (429 {"code":429,"message":"Rate
	// limit exceeded"}).
	err := answer(t, 429, map[string]string{"RateLimit-Limit": "20", "RateLimit-Remaining": "0", "RateLimit-Reset": "3", "Retry-After": "3"},
		`{"code":429,"message":"Rate limit exceeded"}`)
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	require.True(t, sandboxapi.IsRetryable(err))
	wait, ok := sandbox.RetryAfter(err)
	require.True(t, ok, "the delay is kept")
	require.Equal(t, 3*time.Second, wait)

	// The sandbox proxy's per-sandbox connection limit:
	// packages/shared/pkg/proxy/template/sandbox_too_many_connections.go:26-36
	// (its JSON through template.go:63-76).
	err = answer(t, 429, nil, `{"sandboxId":"i0123456789abcdefghi","message":"The sandbox has too many concurrent incoming connections (limit: 1000)","code":429,"connectionLimit":1000}`)
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited, "a passing limit, not a quota")

	// The team's concurrent sandboxes: packages/api/internal/orchestrator/
	// create_instance.go:196-203, sent by apierrors.SendAPIError
	// (packages/shared/pkg/apierrors/apierrors.go:32-44).
	err = answer(t, 429, nil, `{"code":429,"message":"you have reached the maximum number of concurrent E2B sandboxes (20). If you need more, please visit 'https://e2b.dev/docs/billing'"}`)
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.False(t, sandboxapi.IsRetryable(err))
}

// TestRateLimitIsWaitedOut: of two creates at once, the one the stand-in's
// rate limiter refuses (it answers as E2B's does: limits.go) is tried again
// after its Retry-After and goes through.
func TestRateLimitIsWaitedOut(t *testing.T) {
	srv := newFake(t, fake.Options{RateLimits: map[string]fake.RateLimit{"/sandboxes": {Rate: 1, Burst: 1, Period: time.Second}}})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	errs := make(chan error, 2)
	for range 2 {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		go func() {
			_, err := p.Create(ctx, spec)
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 3, srv.Requests()["POST /sandboxes"], "one create refused, then tried again")
}

// TestConcurrentSandboxesAreAQuota: a create beyond the team's concurrent
// sandboxes is refused with E2B's 429 (create_instance.go:196-203, which
// the stand-in copies) and reported as the quota it is, at once.
func TestConcurrentSandboxesAreAQuota(t *testing.T) {
	srv := newFake(t, fake.Options{MaxSandboxes: 1})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	bare, wt := runtimetest.GitFixture(t)
	first := gitSpec(bare, wt)
	_, err := p.Create(ctx, first)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), first.ID) })

	bare2, wt2 := runtimetest.GitFixture(t)
	second := gitSpec(bare2, wt2)
	before := srv.Requests()["POST /sandboxes"]
	_, err = p.Create(ctx, second)
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.Contains(t, err.Error(), "maximum number of concurrent E2B sandboxes (1)")
	require.Equal(t, before+1, srv.Requests()["POST /sandboxes"], "a quota is not retried")
}
