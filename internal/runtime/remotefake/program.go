package remotefake

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Program is a stand-in as a program serves it (daytonafake, e2bfake).
type Program interface {
	// Start listens on addr and serves; it returns the API URL.
	Start(addr string) (string, error)
	// APIKey is the accepted API key.
	APIKey() string
	// Close stops serving and removes the sandboxes' containers.
	Close()
	// Violations returns every spec violation seen.
	Violations() []string
}

// Flags are the flags every stand-in program takes: -addr, -image,
// -api-key and -v.
type Flags struct {
	Addr, Image, APIKey *string
	Verbose             *bool
}

// RegisterFlags defines Flags on the command line (defaultImage: -image's
// default); call flag.Parse after.
func RegisterFlags(defaultImage string) Flags {
	return Flags{
		Addr:    flag.String("addr", "127.0.0.1:0", "listen address (host:port)"),
		Image:   flag.String("image", defaultImage, "image of the sandboxes (never pulled)"),
		APIKey:  flag.String("api-key", "", "the API key to accept (default: a random one, printed)"),
		Verbose: flag.Bool("v", false, "log every request"),
	}
}

// Logger is the program's log on stderr: every request at -v, else info.
func (f Flags) Logger() *slog.Logger {
	level := slog.LevelInfo
	if *f.Verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Serve runs a stand-in program: it starts srv on addr (exit 1 on
// failure), prints the lines "<urlVar>=<url>" and "<keyVar>=<key>" ready to
// export, serves until SIGINT or SIGTERM, then closes srv (waiting at most
// closeWait; 0: until it is done) and exits 3 when srv saw spec violations.
// name ("daytonafake", …) prefixes the messages.
func Serve(name string, srv Program, log *slog.Logger, addr, urlVar, keyVar string, closeWait time.Duration) {
	url, err := srv.Start(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		srv.Close()
		os.Exit(1)
	}
	fmt.Printf("%s=%s\n%s=%s\n", urlVar, url, keyVar, srv.APIKey())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	log.Info(name + ": stopping; removing the sandboxes")
	if closeWait <= 0 {
		srv.Close()
	} else {
		done := make(chan struct{})
		go func() { srv.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeWait):
		}
	}
	if v := srv.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d spec violations\n", name, len(v))
		os.Exit(3)
	}
}
