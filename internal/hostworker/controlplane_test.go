package hostworker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The egress proxy is told every endpoint of the service itself: the
// embedded frontend, Web UI and codec server on the loopback, or the
// configured frontend; the metrics listener; the store's hosts.
func TestControlPlaneEndpoints(t *testing.T) {
	cfg := Config{TemporalPort: 7233, UIPort: 8233, Security: SecurityConfig{CodecPort: 8234}}
	assert.ElementsMatch(t, []string{"127.0.0.1:7233", "[::1]:7233", "127.0.0.1:8233", "[::1]:8233", "127.0.0.1:8234", "[::1]:8234"}, controlPlane(cfg))
	cfg = Config{TemporalAddress: "temporal:7233", MetricsAddr: ":9464", DatabaseURL: "postgres://u:secret@db.internal:5433/sandbox?sslmode=disable"}
	assert.ElementsMatch(t, []string{"temporal:7233", ":9464", "db.internal:5433"}, controlPlane(cfg))
}
