package replica

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A command of a remote runtime (docs/API.md "exec"; docs/DESIGN.md
// "Replica") runs in one pass: a sh wrapper applies the pass, runs the
// command in its own session with stdout and stderr into capped head/tail
// files (through fifos, so nothing unbounded lands on the sandbox's disk),
// enforces the command's timeout itself (a watchdog kills the command's
// process group and session), collects the pass and packs everything into
// one archive that one download brings back. What differs between the
// backends is how the wrapper is started and followed; this file holds the
// rest.

// commandLib runs the command. Variables: X (exec scratch dir), XO (out
// dir), X_TIMEOUT (s), X_HEAD, X_TAIL (bytes kept per stream), X_CWD,
// X_STDIN. The placeholders @HEADNOTE@, @OHEAD@, @EHEAD@ and @CLOSE@ are
// filled by CommandLib.
const commandLib = `x_cmd() {
	mkdir -p "$X" "$XO" || return 1
	base=$(cd "$W" && pwd -P) || { echo 1 > "$XO/badcwd"; return 0; }
	d=$base
	if [ -n "$X_CWD" ]; then
		d=$(cd "$W" && cd -- "$X_CWD" 2>/dev/null && pwd -P) || { echo 1 > "$XO/badcwd"; return 0; }
		case "$d/" in "$base"/*) ;; *) echo 1 > "$XO/badcwd"; return 0 ;; esac
	fi
	mkfifo "$X/of" "$X/ef" "$X/oc" "$X/ec" || return 1
	# head writes through stdio: unbuffered, @HEADNOTE@.
	H=head
	command -v stdbuf >/dev/null 2>&1 && H="stdbuf -o0 head"
	wc -c < "$X/oc" > "$XO/o.count" &
	wc -c < "$X/ec" > "$XO/e.count" &
	{ tee "$X/oc" < "$X/of" & echo $! > "$X/t1"; wait; } | { $H -c "$X_HEAD" @OHEAD@; tail -c "$X_TAIL" > "$XO/o.tail"; } &
	c1=$!
	{ tee "$X/ec" < "$X/ef" & echo $! > "$X/t2"; wait; } | { $H -c "$X_HEAD" @EHEAD@; tail -c "$X_TAIL" > "$XO/e.tail"; } &
	c2=$!
	in=/dev/null
	[ "$X_STDIN" = 1 ] && in="$P/stdin"
	date +%s%N > "$XO/start"
	( cd "$d" && x_exec ) < "$in" > "$X/of" 2> "$X/ef"@CLOSE@ &
	cpid=$!
	echo "$cpid" > "$X/pgid"
	( i=0; while [ "$i" -lt "$X_TIMEOUT" ] && [ ! -e "$X/end" ]; do sleep 1; i=$((i + 1)); done
	  [ -e "$X/end" ] || { echo 1 > "$XO/timedout"; x_kill "$cpid"; } )@CLOSE@ &
	wpid=$!
	wait "$cpid"
	ec=$?
	date +%s%N > "$XO/end"
	: > "$X/end"
	[ -e "$XO/timedout" ] && { ec=124; x_kill "$cpid"; }
	[ -e "$XO/cancelled" ] && x_kill "$cpid"
	# Output still held open by background processes: wait a little, then cut it.
	i=0
	while kill -0 "$c1" 2>/dev/null || kill -0 "$c2" 2>/dev/null; do
		[ "$i" -ge 15 ] && { kill "$(cat "$X/t1")" "$(cat "$X/t2")" 2>/dev/null; break; }
		sleep 0.02; i=$((i + 1))
	done
	wait "$c1" "$c2" 2>/dev/null
	kill "$wpid" 2>/dev/null
	echo "$ec" > "$XO/exit"
	return 0
}
`

// CommandLib returns the sh function x_cmd that runs the command of a pass
// (the variables CommandScript sets). live: the head of each stream also
// goes, as it is written, to file descriptors 5 (stdout) and 6 (stderr),
// which the command itself never inherits (E2B streams them as the
// process's own output); otherwise the head files are the live view, read
// by a waiter (Daytona).
func CommandLib(live bool) string {
	r := strings.NewReplacer(
		"@HEADNOTE@", "the head files are the live view",
		"@OHEAD@", `> "$XO/o.head"`,
		"@EHEAD@", `> "$XO/e.head"`,
		"@CLOSE@", "")
	if live {
		r = strings.NewReplacer(
			"@HEADNOTE@", "the head is the live stream",
			"@OHEAD@", `| tee "$XO/o.head" >&5`,
			"@EHEAD@", `| tee "$XO/e.head" >&6`,
			"@CLOSE@", " 5>&- 6>&-")
	}
	return r.Replace(commandLib)
}

// CommandScript returns the whole wrapper of one exec in pass p: preamble
// (the backend's first lines, e.g. redirections), "set -u", the pass's
// variables, the command's (env: KEY=VALUE entries, req.Cmd an argv run in
// the workdir or req.Cwd below it, req.Timeout() enforced in the sandbox,
// req.OutputCap() split into head and tail, req.Stdin read from $P/stdin
// when set), then apply, run, collect and pack the result (ResultPath);
// last it creates $P/done. live as for CommandLib.
func (p *Pass) CommandScript(preamble string, live bool, env []string, req sandboxapi.ExecRequest) string {
	var b strings.Builder
	b.WriteString(preamble)
	b.WriteString("set -u\n")
	b.WriteString(p.Vars())
	x := path.Join(p.Dir(), "x")
	stdin := 0
	if req.Stdin != nil {
		stdin = 1
	}
	fmt.Fprintf(&b, "X=%s\nXO=%s\nX_TIMEOUT=%d\nX_HEAD=%d\nX_TAIL=%d\nX_CWD=%s\nX_STDIN=%d\n",
		ShQuote(x), ShQuote(p.OutDir()), int(req.Timeout()/time.Second),
		req.OutputCap()/2, req.OutputCap()-req.OutputCap()/2, ShQuote(req.Cwd), stdin)
	b.WriteString(Lib())
	b.WriteString(KillFunction)
	b.WriteString(CommandLib(live))
	b.WriteString(ExecFunction(env, req.Cmd))
	b.WriteString(`rp_apply
rp_s=$?
if [ "$rp_s" -eq 0 ]; then
	x_cmd || { echo 92 > "$P/out/status"; echo "the command could not be started" > "$P/out/error"; }
	rp_collect
fi
`)
	b.WriteString(ResultScript())
	b.WriteString(`: > "$P/done"` + "\n")
	return b.String()
}

// Stream tracks what a command's onChunk has been given (docs/API.md
// "exec": chunks of the first half of each stream's cap as it is written,
// the rest from the result). A nil Stream or one without onChunk streams
// nothing.
type Stream struct {
	onChunk        func(sandboxapi.ExecChunk)
	outOff, errOff int64
}

// NewStream returns a Stream handing chunks to onChunk (nil: none).
func NewStream(onChunk func(sandboxapi.ExecChunk)) *Stream { return &Stream{onChunk: onChunk} }

// Streaming reports whether chunks are handed over at all.
func (s *Stream) Streaming() bool { return s != nil && s.onChunk != nil }

// Offsets returns how many bytes of stdout and stderr were handed over.
func (s *Stream) Offsets() (stdout, stderr int64) { return s.outOff, s.errOff }

// Live hands over new bytes of both streams (a data event of a live stream).
func (s *Stream) Live(stdout, stderr []byte) {
	s.Feed("stdout", stdout)
	s.Feed("stderr", stderr)
}

// Feed hands over new bytes of stream ("stdout" or "stderr").
func (s *Stream) Feed(stream string, data []byte) {
	if len(data) == 0 || !s.Streaming() {
		return
	}
	if stream == "stdout" {
		s.outOff += int64(len(data))
	} else {
		s.errOff += int64(len(data))
	}
	s.onChunk(sandboxapi.ExecChunk{Stream: stream, Data: data})
}

// finish hands over the rest of the result's streams not streamed yet.
func (s *Stream) finish(res sandboxapi.ExecResult) {
	if !s.Streaming() {
		return
	}
	if int64(len(res.Stdout)) > s.outOff {
		s.Feed("stdout", res.Stdout[s.outOff:])
	}
	if int64(len(res.Stderr)) > s.errOff {
		s.Feed("stderr", res.Stderr[s.errOff:])
	}
}

// CommandResult builds a command's result from the out directory of its
// pass (what x_cmd wrote: exit, the head and tail and count of each
// stream, start and end in ns, timedout), then hands st the rest of the
// streams. elapsed is the duration reported when start/end are missing.
// Errors: sandboxapi.ErrRuntimeUnavailable ("<kind>: the command left no exit
// status").
func CommandResult(kind, out string, st *Stream, elapsed time.Duration) (sandboxapi.ExecResult, error) {
	readN := func(name string) int64 {
		b, _ := os.ReadFile(filepath.Join(out, name))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return b
	}
	if _, err := os.Stat(filepath.Join(out, "exit")); err != nil {
		return sandboxapi.ExecResult{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "%s: the command left no exit status", kind)
	}
	code := int(readN("exit"))
	oh, ot, eh, et := read("o.head"), read("o.tail"), read("e.head"), read("e.tail")
	on, en := readN("o.count"), readN("e.count")
	o := output.Outcome{ExitCode: code, Stdout: output.Join(oh, ot, on), Stderr: output.Join(eh, et, en),
		StdoutBytes: on, StderrBytes: en,
		Truncated: on > int64(len(oh)+len(ot)) || en > int64(len(eh)+len(et)), Duration: elapsed}
	if s, e := readN("start"), readN("end"); s > 0 && e >= s {
		o.Duration = time.Duration(e - s)
	}
	if _, err := os.Stat(filepath.Join(out, "timedout")); err == nil {
		o.Reason = sandboxapi.ExitReasonTimeout
	}
	res := o.Result()
	st.finish(res)
	return res, nil
}

// maxResultBytes bounds a command's result archive: the report plus the
// kept output.
const maxResultBytes = DefaultMaxReportBytes + (64 << 20)

// Collect is what CollectCommand needs from a backend once the wrapper of a
// pass has ended.
type Collect struct {
	// Kind prefixes messages ("daytona", "e2b"); Runtime is the runtime's id.
	Kind, Runtime string
	// Log receives the warning when a command's changes did not all come back.
	Log *slog.Logger
	// Download brings the pass's ResultPath to the host file local, at most
	// limit bytes; its errors are returned unchanged.
	Download func(ctx context.Context, local string, limit int64) error
	// Cancelled: the caller's context ended and the command was killed.
	Cancelled bool
	// Started is when the exec began (the duration when the wrapper kept none).
	Started time.Time
}

// CollectCommand downloads and unpacks the result of pass p, applies it to
// the host (Finish) and builds the command's result, with a notice on
// stderr per sync conflict the pass found (Conflict.Notice). An outcome other than
// Applied returns no result (the caller runs the pass again). The command
// ran but its changes did not all come back: the result with that error
// (logged; the changes come with the next pass).
//
// Errors: sandboxapi.ErrInvalidArgument (req.Cwd is not a directory inside the
// workspace); sandboxapi.ErrRuntimeUnavailable wrapping context.Canceled with
// the result when c.Cancelled; those of c.Download, ExtractFlat, Finish and
// CommandResult.
func (p *Pass) CollectCommand(ctx context.Context, c Collect, req sandboxapi.ExecRequest, st *Stream) (sandboxapi.ExecResult, Outcome, error) {
	dir, err := os.MkdirTemp("", "sandboxcore-exec-")
	if err != nil {
		return sandboxapi.ExecResult{}, Applied, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s: temp dir", c.Kind)
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "result.tar")
	if err := c.Download(ctx, archive, maxResultBytes); err != nil {
		return sandboxapi.ExecResult{}, Applied, err
	}
	out := filepath.Join(dir, "out")
	if err := ExtractFlat(archive, out, maxResultBytes); err != nil {
		return sandboxapi.ExecResult{}, Applied, err
	}
	outcome, rep, ferr := p.Finish(ctx, Result{Dir: out})
	if outcome != Applied {
		return sandboxapi.ExecResult{}, outcome, ferr
	}
	if _, err := os.Stat(filepath.Join(out, "badcwd")); err == nil {
		return sandboxapi.ExecResult{}, Applied, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "cwd %q is not a directory inside the workspace", sandboxapi.Clip(req.Cwd, 200))
	}
	res, rerr := CommandResult(c.Kind, out, st, time.Since(c.Started))
	for _, cf := range rep.Conflicts {
		// The command's own output first; then what the sync kept.
		n := "\n" + cf.Notice() + "\n"
		res.Stderr = append(res.Stderr, n...)
		res.StderrBytes += int64(len(n))
	}
	if ferr != nil {
		// The command ran, but its changes did not all come back: they are
		// still in the sandbox and come with the next pass.
		c.Log.Warn(c.Kind+": syncing a command's changes back failed", "runtime", c.Runtime, "error", ferr)
		if rerr == nil {
			rerr = ferr
		}
	}
	if c.Cancelled {
		return res, Applied, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, context.Canceled, "%s: runtime %s: the call was cancelled; the command was killed", c.Kind, c.Runtime)
	}
	return res, Applied, rerr
}

// Command is what RunCommand needs from a backend.
type Command struct {
	// Kind prefixes messages ("daytona", "e2b"); Runtime is the runtime's id.
	Kind, Runtime string
	// Log receives the warning when restoring a read-only replica failed.
	Log *slog.Logger
	// Prepare makes the sandbox ready for a pass (started, kept alive).
	Prepare func(ctx context.Context) error
	// RunPass runs the command in pass p and collects it (CollectCommand).
	RunPass func(ctx context.Context, p *Pass) (sandboxapi.ExecResult, Outcome, error)
	// Transport is the replica's transport (for restoring a read-only replica).
	Transport func() Transport
}

// commandAttempts is how many times a command's pass is run again: after
// the sandbox vanished under it, or when the replica needed a fuller pass.
const commandAttempts = 2

// RunCommand runs one command of a remote runtime in passes of r: a
// sandbox that vanished under the pass (sandboxapi.ErrNotFound) is prepared
// again and the command run again, as is a pass whose outcome asks for a
// resync (NeedGit: the next pass carries the full bundle), at most
// commandAttempts times more. A read-only replica (NeedsRevert) is synced
// back to the host's state after the command (a failure only logged).
// Errors: those of c.Prepare, BeginWith and c.RunPass.
func (r *Replica) RunCommand(ctx context.Context, c Command) (sandboxapi.ExecResult, error) {
	fullBundle := false
	for attempt := 0; ; attempt++ {
		if err := c.Prepare(ctx); err != nil {
			return sandboxapi.ExecResult{}, err
		}
		p, err := r.BeginWith(ctx, fullBundle)
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		res, outcome, err := c.RunPass(ctx, p)
		p.Close()
		if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound && attempt < commandAttempts {
			// The sandbox vanished under the call: recreate and run again.
			continue
		}
		if err != nil || outcome == Applied || attempt >= commandAttempts {
			if err == nil && r.NeedsRevert() {
				if _, rerr := r.Sync(ctx, c.Transport()); rerr != nil {
					c.Log.Warn(c.Kind+": restoring a read-only replica failed", "runtime", c.Runtime, "error", rerr)
				}
			}
			return res, err
		}
		fullBundle = outcome == NeedGit
	}
}
