// Command sandbox-temporal runs the Temporal parts of the production stack
// (docker-compose.yaml) from the go.temporal.io/server and
// github.com/temporalio/ui-server modules this repository already builds
// against, for the locally built images (deploy/local, docs/PRODUCTION.md
// "Without a registry") that stand in for temporalio/server,
// temporalio/admin-tools and temporalio/ui where no registry can be reached.
// Every subcommand reads the same environment variables as the official
// image it replaces, so the services' definitions stay those of the
// published compose file:
//
//	sandbox-temporal server     the Temporal server (frontend, history, matching, worker), configured
//	                            exactly as temporalio/server: the server's embedded config template
//	                            filled from DB, POSTGRES_SEEDS, DB_PORT, POSTGRES_USER, POSTGRES_PWD,
//	                            BIND_ON_IP, DYNAMIC_CONFIG_FILE_PATH, PROMETHEUS_ENDPOINT, …
//	sandbox-temporal schema     create the databases temporal and temporal_visibility when missing
//	                            and bring their schemas to this server's version (the embedded
//	                            PostgreSQL v12 schemas; the temporal-sql-tool steps of temporal-schema)
//	sandbox-temporal namespace  wait for the frontend at TEMPORAL_ADDRESS and register NAMESPACE
//	                            (retention 7 days) unless it exists
//	sandbox-temporal ui         serve the Temporal Web UI on :8080 (TEMPORAL_UI_PORT) for the
//	                            frontend at TEMPORAL_ADDRESS, default namespace TEMPORAL_DEFAULT_NAMESPACE
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	tlog "go.temporal.io/server/common/log"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // the postgres12 plugins
	"go.temporal.io/server/temporal"
	toolschema "go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-temporal server|schema|namespace|ui")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer()
	case "schema":
		err = runSchema()
	case "namespace":
		err = runNamespace()
	case "ui":
		err = runUI()
	default:
		err = fmt.Errorf("unknown subcommand %q (want server, schema, namespace or ui)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-temporal:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// runServer starts every service in this process, as temporalio/server's
// entrypoint does: when BIND_ON_IP is a wildcard the broadcast address
// (what other members and the frontend's clients reach) is this
// container's own address.
func runServer() error {
	if ip := os.Getenv("BIND_ON_IP"); (ip == "0.0.0.0" || ip == "::") && os.Getenv("TEMPORAL_BROADCAST_ADDRESS") == "" {
		own, err := ownAddress()
		if err != nil {
			return err
		}
		_ = os.Setenv("TEMPORAL_BROADCAST_ADDRESS", own)
	}
	cfg, err := config.Load(config.WithEmbedded())
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger := tlog.NewZapLogger(tlog.BuildZapLogger(cfg.Log))
	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return err
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger)
	if err != nil {
		return err
	}
	srv, err := temporal.NewServer(
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithConfig(cfg),
		temporal.WithLogger(logger),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
	)
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

// ownAddress is the first non-loopback IPv4 address of this host.
func ownAddress() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address to broadcast (set TEMPORAL_BROADCAST_ADDRESS)")
}

// runSchema is temporal-schema's job: for each database, create it (an
// existing one is fine), set up the versioning tables, and update to the
// newest embedded schema version (the steps of temporal-sql-tool
// create-database, setup-schema -v 0.0 and update-schema). Idempotent.
func runSchema() error {
	host := env("POSTGRES_SEEDS", "postgresql")
	port := env("DB_PORT", "5432")
	user := env("POSTGRES_USER", env("PGUSER", ""))
	pass := env("POSTGRES_PWD", env("SQL_PASSWORD", ""))
	if user == "" {
		return errors.New("POSTGRES_USER (or PGUSER) is required")
	}
	var last error
	for attempt := 0; attempt < 30; attempt++ { // the database may still be starting
		if last = probe(host, port); last == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if last != nil {
		return fmt.Errorf("PostgreSQL at %s:%s: %w", host, port, last)
	}
	logger := tlog.NewCLILogger()
	for _, db := range []struct{ name, schema string }{
		{env("DBNAME", "temporal"), "postgresql/v12/temporal"},
		{env("VISIBILITY_DBNAME", "temporal_visibility"), "postgresql/v12/visibility"},
	} {
		cfg := &config.SQL{PluginName: env("DB", "postgres12"), DatabaseName: db.name, ConnectAddr: net.JoinHostPort(host, port),
			ConnectProtocol: "tcp", User: user, Password: pass}
		create := *cfg
		if err := sqltool.DoCreateDatabase(&create, "postgres", logger); err != nil {
			if !strings.Contains(err.Error(), "already exists") {
				return fmt.Errorf("create database %s: %w", db.name, err)
			}
			fmt.Printf("database %s exists\n", db.name)
		}
		conn, err := sqltool.NewConnection(cfg, logger)
		if err != nil {
			return fmt.Errorf("database %s: %w", db.name, err)
		}
		err = toolschema.NewSetupSchemaTask(conn, &toolschema.SetupConfig{InitialVersion: "0.0"}, logger).Run()
		if err == nil {
			err = toolschema.NewUpdateSchemaTask(conn, &toolschema.UpdateConfig{DBName: db.name, SchemaName: db.schema}, logger).Run()
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("schema of %s: %w", db.name, err)
		}
	}
	fmt.Println("temporal schemas ready")
	return nil
}

func probe(host, port string) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err
}

// runNamespace waits for the frontend and registers the namespace unless it exists.
func runNamespace() error {
	addr := env("TEMPORAL_ADDRESS", "temporal:7233")
	ns := env("NAMESPACE", "default")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c client.Client
	var err error
	for {
		c, err = client.Dial(client.Options{HostPort: addr, Namespace: ns})
		if err == nil {
			if _, err = c.CheckHealth(ctx, &client.CheckHealthRequest{}); err == nil {
				break
			}
			c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("frontend %s: %w", addr, err)
		case <-time.After(2 * time.Second):
		}
	}
	defer c.Close()
	svc := c.WorkflowService()
	for {
		_, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		if err == nil {
			fmt.Printf("namespace %s ready\n", ns)
			return nil
		}
		var nf *serviceerror.NamespaceNotFound
		if errors.As(err, &nf) {
			_, err = svc.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(7 * 24 * time.Hour),
			})
			var exists *serviceerror.NamespaceAlreadyExists
			if err == nil || errors.As(err, &exists) {
				continue // describe again: registration is visible shortly
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s: %w", ns, err)
		case <-time.After(time.Second):
		}
	}
}

// runUI serves the Web UI until SIGTERM.
func runUI() error {
	port, err := strconv.Atoi(env("TEMPORAL_UI_PORT", "8080"))
	if err != nil {
		return fmt.Errorf("TEMPORAL_UI_PORT: %w", err)
	}
	ui := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                env("TEMPORAL_UI_IP", "0.0.0.0"),
		Port:                port,
		TemporalGRPCAddress: env("TEMPORAL_ADDRESS", "temporal:7233"),
		EnableUI:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		DefaultNamespace:    env("TEMPORAL_DEFAULT_NAMESPACE", "default"),
	}))
	errc := make(chan error, 1)
	go func() { errc <- ui.Start() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case err := <-errc:
		return err
	case <-sig:
		ui.Stop()
		return nil
	}
}
