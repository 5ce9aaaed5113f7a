// Package supervisor is the worker's side of the process that lives inside
// a runtime and spawns its commands (the sandbox-supervisor program, built
// from ./supervisor; the program itself is package daemon): the control
// protocol both speak (protocol.go), Client, Processes and Archive. Used by
// the bubblewrap runtime (every command), the local runtime (background
// processes) and the Docker runtime (background processes); see
// docs/SECURITY.md "Process model".
//
// # Processes
//
// `sandbox-supervisor serve` accepts control connections and runs each
// process on a shim, a subreaper that owns its whole tree (package daemon).
// A command runs in its own session (setsid; its pseudo-terminal as
// controlling terminal for a PTY process) with exactly the environment and
// cwd the worker sends, resolved like execvp against its own PATH (127 not
// found, 126 not executable, a file without #! run by /bin/sh).
//
//   - Foreground processes (Client.Run: the runtime's Exec) belong to the
//     connection that started them: when it closes (the caller cancelled, or
//     the worker died) their whole tree is killed at once; when the leader
//     exits, whatever it left is killed; a timeout kills the tree (exit
//     reason timeout). Their output is never dropped: a stream whose unread
//     part fills its window (256 KiB) is not read further until the client
//     reads (so the command waits), and a read returns the end only once the
//     whole tree has gone.
//   - Background processes (Client.Start) outlive connections and the
//     worker; their descendants outlive the leader (the process is exited,
//     Info.TreeRunning says that some of its tree still runs, KILL ends it).
//     Each stream (stdout and stderr, or the terminal's one stream) goes to
//     a ring buffer of --buffer bytes (default 1 MiB) with absolute offsets:
//     when it wraps, the oldest bytes go and a read from an older offset
//     reports them as dropped. At most --max-procs (default 64) background
//     processes may have a live tree; the 64 most recently ended stay
//     listed and readable.
//   - Exec processes (Spec.Exec: an exec update's command) live like
//     background processes but their tree dies with the leader, they count
//     toward no limit and are not listed; a Spec.ID makes a start happen
//     once (a retried start returns the process), HeadBytes keeps the first
//     bytes of each stream past the buffer's wrap, Lossless makes the
//     command wait while its unread output fills a buffer twice the usual
//     size (while someone reads), "wait" waits for the tree's end, and a
//     kill with reason cancelled records the cancellation.
//   - shutdown (the runtime's Stop) kills every tree with exit reason
//     runtime_stopped, waits for them, returns the background and exec
//     processes with their heads and the newest ArchiveTailBytes of each
//     stream (the worker keeps them in an Archive file, readable
//     afterwards) and exits.
//
// # Protocol
//
// Frames of a 4-byte big-endian length and a JSON Request or Response,
// then a 4-byte length and a raw payload (stdin data to write, output
// read). One request at a time per connection; Client pools connections.
package supervisor
