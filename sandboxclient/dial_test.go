package sandboxclient

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// FromTemporal(nil) is nil (Cleanup.Result and others pass every outcome
// through it): it used to dereference the nil error for its payload hint.
func TestFromTemporalOfNilIsNil(t *testing.T) {
	if err := FromTemporal(nil); err != nil {
		t.Fatalf("FromTemporal(nil) = %v", err)
	}
}

// TestDialErrorNamesTheDefaultAddress: with no address set anywhere, a
// failed dial names the address it tried (it read "Temporal at : failed
// reaching server").
func TestDialErrorNamesTheDefaultAddress(t *testing.T) {
	env := map[string]string{"TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "none.toml")}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var dialled string
	_, err := Dial(ctx, DialOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Logger:    slog.New(slog.DiscardHandler),
		Configure: func(o *client.Options) {
			dialled = o.HostPort
			o.HostPort = "127.0.0.1:1" // nothing listens there; the message still names the settings' address
		},
	})
	if err == nil {
		t.Fatal("dial of 127.0.0.1:1 succeeded")
	}
	if dialled != DefaultAddress {
		t.Errorf("dialled %q, want %q", dialled, DefaultAddress)
	}
	if !strings.Contains(err.Error(), "Temporal at "+DefaultAddress+":") {
		t.Errorf("error %q does not name %s", err, DefaultAddress)
	}
}
