package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/codecserver"
	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Default codec server settings: next to the embedded Web UI (SANDBOX_UI_PORT).
const (
	defaultCodecListen = "127.0.0.1:8234"
)

var defaultUIOrigins = []string{"http://127.0.0.1:8233", "http://localhost:8233"}

func (c *cli) codecServerCommand() *cobra.Command {
	var (
		listen, tokenFile, certFile, keyFile string
		origins                              []string
		plainHTTP                            bool
	)
	cmd := &cobra.Command{
		Use:   "codec-server [--listen ADDR] [--allow-origin URL]... [--token-file FILE] [--https-cert FILE --https-key FILE]",
		Short: "Serve the payload codec (SANDBOX_PAYLOAD_KEYS) to the Temporal Web UI, the Temporal CLI and tools",
		Long: "Serve the payload codec of SANDBOX_PAYLOAD_KEYS over HTTP in the Temporal Web UI's codec endpoint format\n" +
			"(POST /encode and /decode with {\"payloads\": [...]}), so operators holding the token read payloads in the UI;\n" +
			"without it they see ciphertext. Every request needs the token: \"Authorization: Bearer TOKEN\" (the Temporal\n" +
			"CLI's --codec-auth, tools), or the session cookie a browser gets by typing the token at /login once (point the\n" +
			"UI's codec endpoint here with \"include cross-origin credentials\" on). The token comes from --token-file,\n" +
			"else SANDBOX_CODEC_TOKEN_FILE, else SANDBOX_CODEC_TOKEN (at least 32 bytes). Only the --allow-origin\n" +
			"origins may call it from a browser (CORS). Listening beyond loopback needs HTTPS (--https-cert/--https-key,\n" +
			"re-read when they change) or, behind a TLS-terminating proxy, --insecure-plain-http.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			codec, err := payloadcodec.FromEnv(os.LookupEnv)
			if err != nil {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%v", err)
			}
			if codec == nil {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s is not set: the codec server needs the payload keys", payloadcodec.EnvKeys)
			}
			token, source, err := codecToken(tokenFile)
			if err != nil {
				return err
			}
			tlsConf, err := c.codecTLS(listen, certFile, keyFile, plainHTTP)
			if err != nil {
				return err
			}
			h, err := codecserver.New(codecserver.Options{
				Codec: codec, Token: token, AllowedOrigins: origins, Secure: tlsConf != nil,
				Logger: slog.New(slog.NewTextHandler(c.stderr, nil)),
			})
			if err != nil {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%v", err)
			}
			srv, err := codecserver.Start(listen, h, tlsConf)
			if err != nil {
				return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "%v", err)
			}
			defer srv.Close()
			c.printCodecServer(srv.URL, codec, origins, source)
			select {
			case <-cmd.Context().Done():
				return nil
			case err := <-srv.Done():
				return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "codec server stopped: %v", err)
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultCodecListen, "host:port to listen on")
	cmd.Flags().StringSliceVar(&origins, "allow-origin", defaultUIOrigins, "Web UI origin allowed to call the codec from a browser (repeat, or comma-separate)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the bearer token (default: SANDBOX_CODEC_TOKEN_FILE, else SANDBOX_CODEC_TOKEN)")
	cmd.Flags().StringVar(&certFile, "https-cert", "", "serve HTTPS with this certificate (PEM)")
	cmd.Flags().StringVar(&keyFile, "https-key", "", "the HTTPS certificate's key (PEM)")
	cmd.Flags().BoolVar(&plainHTTP, "insecure-plain-http", false, "allow plain HTTP on a non-loopback address (behind a TLS-terminating proxy only)")
	return cmd
}

// codecToken returns the codec server's bearer token and where it came
// from: --token-file, else SANDBOX_CODEC_TOKEN_FILE, else SANDBOX_CODEC_TOKEN
// (codecserver.TokenFromEnv). Errors: InvalidArgument for an unreadable or
// short token, or none at all.
func codecToken(tokenFile string) (token, source string, err error) {
	token, source = "", "--token-file"
	if tokenFile != "" {
		token, err = codecserver.LoadToken(tokenFile)
	} else {
		token, source, err = codecserver.TokenFromEnv(os.LookupEnv)
	}
	if err != nil {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%v", err)
	}
	if token == "" {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "no token: give --token-file, or set %s or %s", codecserver.EnvTokenFile, codecserver.EnvToken)
	}
	return token, source, nil
}

// codecTLS checks the listen address and the HTTPS flags of codec-server
// and returns its TLS configuration: certFile and keyFile (re-read when
// they change), or nil for plain HTTP — on a loopback address only, unless
// plainHTTP (behind a TLS-terminating proxy). Errors: InvalidArgument.
func (c *cli) codecTLS(listen, certFile, keyFile string, plainHTTP bool) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--listen %q: want host:port", listen)
	}
	if (certFile == "") != (keyFile == "") {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--https-cert and --https-key go together")
	}
	if certFile != "" {
		kp, err := temporalconn.NewKeyPairFile(certFile, keyFile, "--https-cert / --https-key", slog.New(slog.NewTextHandler(c.stderr, nil)))
		if err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%v", err)
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.GetCertificate}, nil
	}
	if !plainHTTP && !isLoopbackHost(host) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--listen %s is not a loopback address: serve HTTPS (--https-cert, --https-key) or, behind a TLS-terminating proxy, pass --insecure-plain-http", listen)
	}
	return nil, nil
}

// printCodecServer says where the codec server listens and how to point the
// Web UI and the Temporal CLI at it (with --json: the same as an object).
func (c *cli) printCodecServer(url string, codec *payloadcodec.Codec, origins []string, source string) {
	if c.asJSON {
		_ = c.printJSON(map[string]any{"endpoint": url, "login": url + "/login", "allowed_origins": origins,
			"key_ids": codec.KeyIDs(), "token_from": source})
		return
	}
	fmt.Fprintf(c.stdout, "codec server %s (keys %v, encrypting with %q; token from %s)\n", url, codec.KeyIDs(), codec.EncryptionKeyID(), source)
	fmt.Fprintf(c.stdout, "  Web UI: codec endpoint %s with \"include cross-origin credentials\", then log in once at %s/login\n", url, url)
	fmt.Fprintf(c.stdout, "  allowed origins %v; Temporal CLI: --codec-endpoint %s --codec-auth \"Bearer $TOKEN\"\n", origins, url)
}
