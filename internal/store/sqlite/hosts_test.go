package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
)

func TestHostsContract(t *testing.T) {
	storetest.RunHosts(t, func(t *testing.T) func() storetest.HostStore {
		path := filepath.Join(t.TempDir(), "sandbox.db")
		return func() storetest.HostStore {
			s, err := Open(context.Background(), path)
			require.NoError(t, err)
			return s
		}
	})
}
