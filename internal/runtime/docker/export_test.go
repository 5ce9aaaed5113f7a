package docker

import (
	"log/slog"

	"github.com/docker/docker/client"
)

// NewUnchecked builds a Provider without pinging the daemon, so tests can
// point it at a daemon that does not answer.
func NewUnchecked(opts Options) (*Provider, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(opts.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	return &Provider{cli: cli, host: cli.DaemonHost(), image: opts.Image, stopTimeout: DefaultStopTimeout, log: slog.New(slog.DiscardHandler)}, nil
}
