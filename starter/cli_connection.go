package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// defaultAddress is the frontend when neither a flag, TEMPORAL_ADDRESS nor
// the profile names one: the worker's embedded server (SANDBOX_TEMPORAL_PORT).
const defaultAddress = "127.0.0.1:7233"

// connectionFlags adds the Temporal connection flags, named like the Temporal
// CLI's. Each wins over its environment variable, which wins over the TOML
// profile (go.temporal.io/sdk/contrib/envconfig; README.md "Configuration").
func (c *cli) connectionFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	n := &c.conn
	f.StringVar(&n.Address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS, else the profile's, else "+defaultAddress+")")
	f.StringVar(&n.Namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, else the profile's, else default)")
	f.StringVar(&n.Profile, "profile", "", "profile of the Temporal config file (default: TEMPORAL_PROFILE, else default)")
	f.StringVar(&n.ConfigFile, "config-file", "", "Temporal TOML config file (default: TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml)")
	f.StringVar(&n.APIKey, "api-key", "", "Temporal API key, implies TLS (prefer TEMPORAL_API_KEY: a command line is visible to other users)")
	f.BoolVar(&c.tlsFlag, "tls", false, "connect with TLS (TEMPORAL_TLS)")
	f.StringVar(&n.TLSCertPath, "tls-cert-path", "", "client certificate for mutual TLS, PEM (TEMPORAL_TLS_CLIENT_CERT_PATH; re-read when it changes)")
	f.StringVar(&n.TLSKeyPath, "tls-key-path", "", "client certificate's key, PEM (TEMPORAL_TLS_CLIENT_KEY_PATH)")
	f.StringVar(&n.TLSCAPath, "tls-ca-path", "", "CA that signed the server's certificate, PEM (TEMPORAL_TLS_SERVER_CA_CERT_PATH; re-read when it changes)")
	f.StringVar(&n.TLSCertData, "tls-cert-data", "", "client certificate PEM itself (TEMPORAL_TLS_CLIENT_CERT_DATA)")
	f.StringVar(&n.TLSKeyData, "tls-key-data", "", "client key PEM itself (prefer TEMPORAL_TLS_CLIENT_KEY_DATA)")
	f.StringVar(&n.TLSCAData, "tls-ca-data", "", "server CA PEM itself (TEMPORAL_TLS_SERVER_CA_CERT_DATA)")
	f.StringVar(&n.TLSServerName, "tls-server-name", "", "name the server's certificate must hold (TEMPORAL_TLS_SERVER_NAME; default: the address's host)")
	f.BoolVar(&c.noVerify, "tls-disable-host-verification", false, "do not verify the server's certificate at all (TEMPORAL_TLS_DISABLE_HOST_VERIFICATION; unsafe)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// Booleans override the environment only when given.
		if cmd.Flags().Changed("tls") {
			v := c.tlsFlag
			n.TLS = &v
		}
		if cmd.Flags().Changed("tls-disable-host-verification") {
			v := c.noVerify
			n.TLSDisableHostVerification = &v
		}
		return nil
	}
}

// connectError types a failure to connect: bad settings are
// InvalidArgument (exit 2), an unreachable or refusing server
// RuntimeUnavailable (exit 1); both keep the message naming the setting.
func connectError(err error) error {
	var le *temporalconn.LoadError
	var ke *payloadcodec.KeysError
	if errors.As(err, &le) || errors.As(err, &ke) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%v", err)
	}
	var de *temporalconn.DialError
	if errors.As(err, &de) && de.Hint == "" {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "cannot reach %v (is the worker running? see `make run`; if it listens elsewhere, set TEMPORAL_ADDRESS or --address to the address it printed)", err)
	}
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "cannot connect: %v", err)
}
