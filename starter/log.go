package main

import "log/slog"

// discardLogger silences the Temporal SDK's own log lines in the CLI.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
