// Package daemon is the sandbox-supervisor program (built from
// ./supervisor): the process that lives inside a runtime and spawns its
// commands, speaking the control protocol of package supervisor (which
// also holds the worker's side: Client, Processes, Archive, and what each
// kind of process promises). See docs/SECURITY.md "Process model".
//
// Main dispatches the program's commands: `serve` (serve.go: options, the
// control socket, connections, dispatch), `shim` (shim.go), `relay` and
// `connect` (main.go). The server starts processes (launch.go), follows
// them to their end (follow.go), buffers and serves their output
// (output.go), writes, signals, waits for, lists and prunes them
// (control.go), keeps a pool of ready shims (shimpool.go), reaps and
// sweeps orphans (reaper.go, tree.go) and shuts down (shutdown.go); ring.go
// is the output buffer, egress.go the limited network's forwarder.
//
// # Processes
//
// `sandbox-supervisor serve` accepts control connections and runs each
// process on a shim: the same binary re-executed as `shim`, a subreaper
// (PR_SET_CHILD_SUBREAPER) that owns one process tree at a time, so every
// descendant of the command stays below it however it daemonizes (setsid,
// double fork), and that is reused for the next command once its tree is
// empty (a command costs one fork/exec; a couple of free shims are kept
// ready).
//
// Killing a tree sends SIGKILL to every descendant of its shim found in
// /proc (readable whatever a process did to itself), again after each reap
// until the shim has no child left. A process that kills its own shim loses
// its tracking: its orphans come to the supervisor, which kills every child
// of its own that is not a shim.
//
// # The supervisor itself
//
// It makes itself non-dumpable (so no process of the sandbox can ptrace it
// or open its descriptors through /proc; the bubblewrap runtime also runs it
// from an execute-only file, so that shims are non-dumpable from their
// first instruction), and relays every catchable signal to a channel it
// drains: as the init of a pid namespace (bubblewrap) it cannot be killed
// from inside at all. Outside one (local, Docker under its init) it is a
// subreaper. Its control socket is a descriptor it inherits (bubblewrap,
// local: a listening socket on a host path no sandbox sees) or an abstract
// unix socket (Docker: reached through `sandbox-supervisor relay` run with
// docker exec).
package daemon
