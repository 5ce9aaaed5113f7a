package daytona

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
)

// TestSmoke runs the scripted smoke check (runtimetest.Smoke) against the
// real Daytona: make smoke-daytona with DAYTONA_API_KEY (DAYTONA_API_URL,
// DAYTONA_TARGET optional) and SANDBOX_SMOKE=1; skipped otherwise.
func TestSmoke(t *testing.T) {
	key := runtimetest.SmokeKey(t, "DAYTONA_API_KEY")
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	p, err := New(Options{APIURL: os.Getenv("DAYTONA_API_URL"), APIKey: key, Target: os.Getenv("DAYTONA_TARGET"),
		Deployment: "smoke", StateDir: t.TempDir(), Git: git, Logger: runtimetest.Logger(t, 0)})
	require.NoError(t, err)
	bare, wt := runtimetest.GitFixture(t)
	runtimetest.Smoke(t, p, gitSpec(bare, wt), wt)
}

// TestSmokeOnTheStandIn runs the same smoke check against the fake Daytona,
// so that the script itself is known to pass where the service behaves.
func TestSmokeOnTheStandIn(t *testing.T) {
	srv := newFake(t, fake.Options{})
	bare, wt := runtimetest.GitFixture(t)
	runtimetest.Smoke(t, newProvider(t, srv, nil), gitSpec(bare, wt), wt)
}
