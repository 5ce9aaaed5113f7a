// Command sandboxctl is the sandboxcore CLI for agents and operators: acquire
// a workspace, run commands, read and write files, search, diff and commit,
// hibernate and release — each one update on the workspace's SessionWorkflow.
// It reads TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE and
// SANDBOX_TASK_QUEUE. Exit codes: `exec` exits with the command's code; other
// commands exit 0 on success, 2 on invalid arguments, 1 on any other error.
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
