package activities

import (
	"github.com/sandboxcore/sandboxcore/internal/repocache"
	"github.com/sandboxcore/sandboxcore/internal/store/postgres"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
)

// Both metadata stores implement the activities' port (docs/DESIGN.md
// "Ports"); their contract suites are storetest.Run and storetest.RunHosts.
var (
	_ Store = (*sqlite.Store)(nil)
	_ Store = (*postgres.Store)(nil)
)

// The repo cache's optional capabilities eviction asserts.
var (
	_ RepoCachePather  = (*repocache.Cache)(nil)
	_ RepoCacheRemover = (*repocache.Cache)(nil)
)
