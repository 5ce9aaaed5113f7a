// Command sandboxctl is the sandboxcore CLI for agents and operators: acquire
// a workspace, run commands, read and write files, search, diff and commit,
// hibernate and release — each one update on the workspace's SessionWorkflow.
// It connects like the worker (README.md "Configuration"): the Temporal SDK's
// environment configuration (TEMPORAL_ADDRESS, default 127.0.0.1:7233,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE and its
// TOML file) under the Temporal CLI's flags (--address, --api-key, --tls-*,
// --profile, …), SANDBOX_PAYLOAD_KEYS for encrypted payloads, and
// SANDBOX_TASK_QUEUE; `codec-server` serves the payload codec to the Web UI.
// Exit codes (README "Walkthrough"; the table is exitCodes in cli_exit.go):
// `exec` exits with the command's code; other commands exit 0 on success, 2
// on invalid arguments (InvalidArgument, InvalidWorkspacePath, a refused
// command line; a bad connection setting included), 1 on any other error.
// They follow the error's kind, never its message.
//
// One file per command group: cli.go (Main, the root command), cli_run.go
// (the one body of a command: session, call, text or --json), cli_exit.go
// (exit codes, usage errors), cli_session.go (acquire, release, hibernate,
// describe, list), cli_exec.go (exec, output, preview), cli_files.go (read,
// write, ls, search, edit), cli_git.go (status, diff, log, commit),
// cli_push.go (push, pr), cli_proc.go (proc), cli_lifecycle.go (checkpoint,
// rollback, fork, destroy, cleanup), cli_eviction.go (eviction, pin, unpin,
// restore), cli_fanout.go (fanout), cli_runtimes.go (runtimes), cli_mcp.go
// (mcp), cli_codec.go (codec-server), cli_connection.go (the Temporal
// connection flags).
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
