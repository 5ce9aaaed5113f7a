package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// A command runs in the sandbox as one envd process (process.Process/Start,
// tagged TagExec+<pass id>): a sh wrapper that applies the replica pass,
// runs the command in its own session with stdout and stderr into capped
// head/tail files (through fifos: nothing unbounded lands on the sandbox's
// disk), streams the head of each stream as the process's own output,
// enforces the command's timeout itself (a watchdog kills the command's
// process group and session: envd is never given a deadline, since it kills
// a process when its Start's deadline passes), collects the pass and packs
// everything into one archive that one GET /files brings back.
//
// A stream that breaks (E2B's proxies cut long streams; a keepalive missing
// for three intervals counts as broken) is followed again by the process's
// tag (process.Process/Connect): the process lives on in the sandbox and
// nothing is lost, because its output is in the files the result holds; the
// live stream stops at the break and the rest is handed over from the result.
// A sandbox paused under a command (its timeout) is resumed and the command
// followed on; a sandbox that vanished is created again and the command run
// again on the re-synced replica.

// Tags of the processes this package starts.
const (
	TagExec = "sandboxcore-exec-"
	TagRun  = "sandboxcore-run-"
)

// execLib runs the command. Variables: X (exec scratch dir), XO (out dir),
// X_TIMEOUT (s), X_HEAD, X_TAIL (bytes kept per stream), X_CWD, X_STDIN.
// File descriptors 5 and 6 are the wrapper's stdout and stderr (envd's
// pipes): the head of each stream goes there as it is written.
const execLib = `x_cmd() {
	mkdir -p "$X" "$XO" || return 1
	base=$(cd "$W" && pwd -P) || { echo 1 > "$XO/badcwd"; return 0; }
	d=$base
	if [ -n "$X_CWD" ]; then
		d=$(cd "$W" && cd -- "$X_CWD" 2>/dev/null && pwd -P) || { echo 1 > "$XO/badcwd"; return 0; }
		case "$d/" in "$base"/*) ;; *) echo 1 > "$XO/badcwd"; return 0 ;; esac
	fi
	mkfifo "$X/of" "$X/ef" "$X/oc" "$X/ec" || return 1
	# head writes through stdio: unbuffered, the head is the live stream.
	H=head
	command -v stdbuf >/dev/null 2>&1 && H="stdbuf -o0 head"
	wc -c < "$X/oc" > "$XO/o.count" &
	wc -c < "$X/ec" > "$XO/e.count" &
	{ tee "$X/oc" < "$X/of" & echo $! > "$X/t1"; wait; } | { $H -c "$X_HEAD" | tee "$XO/o.head" >&5; tail -c "$X_TAIL" > "$XO/o.tail"; } &
	c1=$!
	{ tee "$X/ec" < "$X/ef" & echo $! > "$X/t2"; wait; } | { $H -c "$X_HEAD" | tee "$XO/e.head" >&6; tail -c "$X_TAIL" > "$XO/e.tail"; } &
	c2=$!
	in=/dev/null
	[ "$X_STDIN" = 1 ] && in="$P/stdin"
	date +%s%N > "$XO/start"
	( cd "$d" && x_exec ) < "$in" > "$X/of" 2> "$X/ef" 5>&- 6>&- &
	cpid=$!
	echo "$cpid" > "$X/pgid"
	( i=0; while [ "$i" -lt "$X_TIMEOUT" ] && [ ! -e "$X/end" ]; do sleep 1; i=$((i + 1)); done
	  [ -e "$X/end" ] || { echo 1 > "$XO/timedout"; x_kill "$cpid"; } ) 5>&- 6>&- &
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

// script builds the wrapper of one exec.
func (r *Runtime) script(p *replica.Pass, req sandbox.ExecRequest, hasStdin bool, prev string) string {
	env := procexec.EnvList(procexec.BaseEnv(r.home()), r.specEnv(), req.Env)
	var b strings.Builder
	b.WriteString("exec 5>&1 6>&2 >/dev/null 2>&1\nset -u\n")
	if prev != "" {
		fmt.Fprintf(&b, "rm -rf %s\n", replica.ShQuote(prev))
	}
	b.WriteString(p.Vars())
	x := path.Join(p.Dir(), "x")
	fmt.Fprintf(&b, "X=%s\nXO=%s\nX_TIMEOUT=%d\nX_HEAD=%d\nX_TAIL=%d\nX_CWD=%s\nX_STDIN=%d\n",
		replica.ShQuote(x), replica.ShQuote(p.OutDir()), int(req.Timeout()/time.Second),
		req.OutputCap()/2, req.OutputCap()-req.OutputCap()/2, replica.ShQuote(req.Cwd), b2i(hasStdin))
	b.WriteString(replica.Lib())
	b.WriteString(replica.KillFunction)
	b.WriteString(execLib)
	b.WriteString(replica.ExecFunction(env, req.Cmd))
	b.WriteString(`rp_apply
rp_s=$?
if [ "$rp_s" -eq 0 ]; then
	x_cmd || { echo 92 > "$P/out/status"; echo "the command could not be started" > "$P/out/error"; }
	rp_collect
fi
`)
	b.WriteString(replica.ResultScript())
	b.WriteString(`: > "$P/done"` + "\n")
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *Runtime) specEnv() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spec == nil {
		return nil
	}
	return r.spec.Env
}

// Exec runs one command (ExecStream without streaming).
func (r *Runtime) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// enter registers a command in flight, waiting while Stop kills the running ones.
func (r *Runtime) enter(ctx context.Context) error {
	for r.stopping.Load() {
		select {
		case <-ctx.Done():
			return ctxErr(ctx, "wait for the runtime's hibernation")
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.active.Add(1)
	return nil
}

func (r *Runtime) leave() { r.active.Add(-1) }

// ExecStream (docs/DESIGN.md "Ports"; docs/API.md "exec") syncs the replica,
// runs req.Cmd (an argv) in the sandbox in the workdir or req.Cwd below it,
// syncs back what it changed and returns its result; onChunk, when set,
// receives the first half of each stream's cap as envd streams it (calls
// are serialized), the result always holds head and tail.
//
// Results, not errors: a non-zero exit; 127 (not found) and 126 (not
// executable) from sh; 128+n when killed by signal n (Stop kills the
// commands in flight); 124 with TimedOut after req.Timeout(), the
// command's process group and session killed in the sandbox. Output caps
// as on every runtime (head and tail, Truncated, full counts).
//
// Errors: sandbox.ErrInvalidArgument (a bad request: nothing runs; a cwd
// that is missing, not a directory or leads out of the workdir in the
// sandbox); sandbox.ErrRuntimeUnavailable (E2B or the sandbox failed;
// wrapping context.Canceled when ctx was cancelled: the command is killed
// and what it changed is still synced back); sandbox.ErrTimeout (ctx's
// deadline); the kinds of mapHTTP and mapConnect.
func (r *Runtime) ExecStream(ctx context.Context, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	if err := runspec.ValidateExec(req); err != nil {
		return sandbox.ExecResult{}, err
	}
	if strings.HasPrefix(req.Cmd[0], "-") {
		out := procexec.NewOutput(req.OutputCap(), onChunk)
		return out.Notice(127, req.Cmd[0], "command not found"), nil
	}
	_ = r.loadSpec()
	rep := r.replica()
	if rep == nil {
		return sandbox.ExecResult{}, sandbox.Errorf(sandbox.ErrInvalidArgument, "e2b: runtime %s has no workspace (create it with its spec)", r.id)
	}
	r.mu.Lock()
	spec := r.spec
	r.mu.Unlock()
	if err := procexec.SingleNetwork(Kind, "exec", spec, req.Network); err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := r.enter(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	defer r.leave()
	fullBundle := false
	for attempt := 0; ; attempt++ {
		env, err := r.ensure(ctx)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		if err := r.keepAlive(ctx, env.rec.SandboxID, req.Timeout()+2*time.Minute); err != nil {
			return sandbox.ExecResult{}, err
		}
		_ = os.Remove(filepath.Join(r.p.stateDir(r.id), "hibernated"))
		p, err := rep.BeginWith(ctx, fullBundle)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		res, outcome, err := r.execPass(ctx, env, p, req, onChunk)
		p.Close()
		if sandbox.KindOf(err) == sandbox.ErrNotFound && attempt < 2 {
			// The sandbox vanished under the call: recreate and run again.
			continue
		}
		if err != nil || outcome == replica.Applied || attempt >= 2 {
			if err == nil && rep.NeedsRevert() {
				if _, rerr := rep.Sync(ctx, r.transport()); rerr != nil {
					r.p.log.Warn("e2b: restoring a read-only replica failed", "runtime", r.id, "error", rerr)
				}
			}
			return res, err
		}
		fullBundle = outcome == replica.NeedGit
	}
}

// execPass runs one pass with the command in it.
func (r *Runtime) execPass(ctx context.Context, env *envdClient, p *replica.Pass, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, replica.Outcome, error) {
	start := time.Now()
	for _, part := range p.Parts() {
		if err := env.upload(ctx, part.Local, part.Remote); err != nil {
			return sandbox.ExecResult{}, replica.Applied, r.gone(ctx, err)
		}
	}
	if req.Stdin != nil {
		if err := r.uploadBytes(ctx, env, req.Stdin, path.Join(p.Dir(), "stdin")); err != nil {
			return sandbox.ExecResult{}, replica.Applied, r.gone(ctx, err)
		}
	}
	r.mu.Lock()
	prev := r.lastPass
	r.lastPass = ""
	r.mu.Unlock()
	script := r.script(p, req, req.Stdin != nil, prev)
	argv := []string{"/bin/sh", "-c", script}
	if len(script) > 96<<10 {
		// Beyond what one argument may hold (MAX_ARG_STRLEN): a file.
		f := path.Join(p.Dir(), "run.sh")
		if err := r.uploadBytes(ctx, env, []byte(script), f); err != nil {
			return sandbox.ExecResult{}, replica.Applied, r.gone(ctx, err)
		}
		argv = []string{"/bin/sh", f}
	}
	tag := TagExec + path.Base(p.Dir())
	st := &streamState{onChunk: onChunk}
	// The command's own timeout is enforced in the sandbox; the host gives
	// up only well after it (a sandbox that stopped answering).
	until := time.Now().Add(req.Timeout() + 2*time.Minute)
	s, stop, err := env.start(ctx, tag, argv, "")
	if err != nil {
		return sandbox.ExecResult{}, replica.Applied, r.gone(ctx, err)
	}
	f := follow{r: r, tag: tag, until: until, onData: st.live}
	ferr := f.run(ctx, s, stop)
	cancelled := false
	if ferr != nil && ctx.Err() != nil {
		// The call was cancelled: kill the command, then collect what it did.
		cancelled = true
		bctx, c := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer c()
		r.kill(bctx, p.Dir())
		f.onData, f.until = nil, time.Now().Add(20*time.Second)
		ferr = f.run(bctx, nil, nil)
		ctx = bctx
	}
	if ferr != nil && !errors.Is(ferr, errEnded) {
		return sandbox.ExecResult{}, replica.Applied, ferr
	}
	dir, err := os.MkdirTemp("", "sandboxcore-exec-")
	if err != nil {
		return sandbox.ExecResult{}, replica.Applied, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "e2b: temp dir")
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "result.tar")
	env = r.envd()
	if env == nil {
		return sandbox.ExecResult{}, replica.Applied, sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "e2b: runtime %s lost its sandbox", r.id)
	}
	if err := env.download(ctx, p.ResultPath(), archive, replica.DefaultMaxReportBytes+(64<<20)); err != nil {
		if errors.Is(err, errNoFile) && !f.started {
			// envd never started the wrapper (the Start stream failed before
			// its start event, and no process has the tag): nothing ran.
			return sandbox.ExecResult{}, replica.Applied, sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "e2b: runtime %s: the command could not be started", r.id)
		}
		return sandbox.ExecResult{}, replica.Applied, r.gone(ctx, err)
	}
	r.mu.Lock()
	if r.lastPass == "" {
		r.lastPass = p.Dir() // removed by the next command's wrapper
	}
	r.mu.Unlock()
	out := filepath.Join(dir, "out")
	if err := replica.ExtractFlat(archive, out, replica.DefaultMaxReportBytes+(64<<20)); err != nil {
		return sandbox.ExecResult{}, replica.Applied, err
	}
	outcome, _, ferr2 := p.Finish(ctx, replica.Result{Dir: out})
	if outcome != replica.Applied {
		return sandbox.ExecResult{}, outcome, ferr2
	}
	if _, err := os.Stat(filepath.Join(out, "badcwd")); err == nil {
		return sandbox.ExecResult{}, replica.Applied, sandbox.Errorf(sandbox.ErrInvalidArgument, "cwd %q is not a directory inside the workspace", sandbox.Clip(req.Cwd, 200))
	}
	res, rerr := resultOf(out, st, time.Since(start))
	if ferr2 != nil {
		// The command ran, but its changes did not all come back: they are
		// still in the sandbox and come with the next pass.
		r.p.log.Warn("e2b: syncing a command's changes back failed", "runtime", r.id, "error", ferr2)
		if rerr == nil {
			rerr = ferr2
		}
	}
	if cancelled {
		return res, replica.Applied, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, context.Canceled, "e2b: runtime %s: the call was cancelled; the command was killed", r.id)
	}
	return res, replica.Applied, rerr
}

// envd returns the current envd client (nil when the sandbox is gone).
func (r *Runtime) envd() *envdClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.env
}

func (r *Runtime) uploadBytes(ctx context.Context, env *envdClient, data []byte, remote string) error {
	f, err := os.CreateTemp("", "sandboxcore-upload-")
	if err != nil {
		return sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "e2b: temp file")
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return sandbox.Wrap(sandbox.ErrRuntimeUnavailable, werr, "e2b: temp file")
	}
	return env.upload(ctx, f.Name(), remote)
}

// gone turns a failure of an envd call into sandbox.ErrNotFound when the
// sandbox vanished (the caller recreates it); a paused one is resumed and
// the failure returned as retryable.
func (r *Runtime) gone(ctx context.Context, err error) error {
	if ctx.Err() != nil || sandbox.KindOf(err) != sandbox.ErrRuntimeUnavailable || errors.Is(err, errNoFile) {
		return err
	}
	if rerr := r.revive(ctx, err); rerr != nil {
		return rerr
	}
	return err
}

// errEnded: the process ended while no stream followed it (its end event
// was not seen); its result is in the sandbox.
var errEnded = errors.New("the process ended unobserved")

// follow follows one process by its tag until its end event.
type follow struct {
	r     *Runtime
	tag   string
	until time.Time
	// onData receives the live output (the first stream's only).
	onData func(stdout, stderr []byte)
	// started: a start event was seen, or the process was found by its tag.
	started    bool
	end        bool
	reconnects int
}

// run reads s (nil: connect by the tag first) until the process's end.
// Errors: errEnded (the process is gone without an end event seen); the
// caller's context error (ctx ended: the streams are closed, the process
// lives on); sandbox.ErrNotFound (the sandbox vanished);
// sandbox.ErrRuntimeUnavailable (no stream could be had until f.until).
func (f *follow) run(ctx context.Context, s *stream, stop context.CancelFunc) error {
	keep := 3 * f.r.p.opts.Keepalive
	for {
		if s == nil {
			if time.Now().After(f.until) {
				return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "e2b: runtime %s: the command did not finish %v after its timeout", f.r.id, 2*time.Minute)
			}
			env := f.r.envd()
			if env == nil {
				return sandbox.Errorf(sandbox.ErrNotFound, "e2b: runtime %s: its sandbox vanished", f.r.id)
			}
			var err error
			s, stop, err = env.connectTag(ctx, f.tag)
			if sandbox.KindOf(err) == sandbox.ErrNotFound {
				return errEnded
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctxErr(ctx, "follow the command")
				}
				if gerr := f.r.gone(ctx, err); sandbox.KindOf(gerr) == sandbox.ErrNotFound {
					return gerr
				}
				select {
				case <-ctx.Done():
					return ctxErr(ctx, "follow the command")
				case <-time.After(time.Duration(min(f.reconnects+1, 10)) * 200 * time.Millisecond):
				}
				f.reconnects++
				continue
			}
			f.started = true
		}
		err := f.read(ctx, s, stop, keep)
		if err == nil {
			return nil // the end event
		}
		if ctx.Err() != nil {
			return ctxErr(ctx, "follow the command")
		}
		if mapped := f.r.p.mapConnect(ctx, err, "follow process "+f.tag); sandbox.KindOf(mapped) != sandbox.ErrRuntimeUnavailable {
			return mapped // envd's decision (an access token refused, …), not a cut
		}
		// The stream broke: follow the process again by its tag. What was
		// streamed so far stays; the rest comes from the result.
		f.r.p.log.Debug("e2b: a process stream ended early; reconnecting", "runtime", f.r.id, "tag", f.tag, "error", err)
		f.onData = nil
		f.reconnects++
		s = nil
		if gerr := f.r.gone(ctx, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "e2b: process stream")); sandbox.KindOf(gerr) == sandbox.ErrNotFound {
			return gerr
		}
	}
}

// read reads one stream until the end event (nil), its end or a silence
// longer than keep (an error), or ctx's end.
func (f *follow) read(ctx context.Context, s *stream, stop context.CancelFunc, keep time.Duration) error {
	defer stop()
	events := make(chan struct{}, 1)
	done := make(chan error, 1)
	var endSeen bool
	go func() {
		for {
			ev, ok := s.next()
			if !ok {
				err := s.err()
				if err == nil {
					err = errors.New("the stream ended")
				}
				done <- err
				return
			}
			switch {
			case ev.GetStart() != nil:
				f.started = true
			case ev.GetData() != nil:
				if f.onData != nil {
					f.onData(ev.GetData().GetStdout(), ev.GetData().GetStderr())
				}
			case ev.GetEnd() != nil:
				endSeen = true
				done <- nil
				return
			}
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(keep)
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			if err == nil && endSeen {
				f.end = true
				return nil
			}
			return err
		case <-events:
			timer.Reset(keep)
		case <-timer.C:
			stop()
			<-done
			return fmt.Errorf("no event for %v", keep)
		case <-ctx.Done():
			stop()
			<-done
			return ctx.Err()
		}
	}
}

// kill kills the command of a pass (the caller's context ended).
func (r *Runtime) kill(ctx context.Context, dir string) {
	env := r.envd()
	if env == nil {
		return
	}
	script := replica.CancelScript(dir)
	if _, _, err := env.run(ctx, script); err != nil {
		r.p.log.Warn("e2b: kill a cancelled command", "runtime", r.id, "error", err)
	}
}

var passIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// killCommands kills the commands in flight (Stop): the processes envd
// lists with this package's exec tag; their wrappers then collect the pass
// and end, and their calls return.
func (r *Runtime) killCommands(ctx context.Context, env *envdClient) {
	procs, err := env.list(ctx)
	if err != nil {
		r.p.log.Warn("e2b: list the commands to stop", "runtime", r.id, "error", err)
		return
	}
	var b strings.Builder
	b.WriteString(replica.KillFunction)
	n := 0
	for _, pi := range procs {
		id, ok := strings.CutPrefix(pi.GetTag(), TagExec)
		if !ok || !passIDRE.MatchString(id) {
			continue
		}
		dir := path.Join(r.remoteState(), "pass", id)
		fmt.Fprintf(&b, "p=$(cat %s 2>/dev/null) && x_kill \"$p\"\n", replica.ShQuote(dir+"/x/pgid"))
		n++
	}
	if n == 0 {
		return
	}
	b.WriteString("exit 0\n")
	if _, _, err := env.run(ctx, b.String()); err != nil {
		r.p.log.Warn("e2b: kill the commands in flight", "runtime", r.id, "error", err)
	}
}

// resultOf builds the command's result from the out directory.
func resultOf(out string, st *streamState, elapsed time.Duration) (sandbox.ExecResult, error) {
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
		return sandbox.ExecResult{}, sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "e2b: the command left no exit status")
	}
	code := int(readN("exit"))
	oh, ot, eh, et := read("o.head"), read("o.tail"), read("e.head"), read("e.tail")
	on, en := readN("o.count"), readN("e.count")
	res := sandbox.ExecResult{
		ExitCode: code, Stdout: output.Join(oh, ot, on), Stderr: output.Join(eh, et, en),
		StdoutBytes: on, StderrBytes: en,
		Truncated: on > int64(len(oh)+len(ot)) || en > int64(len(eh)+len(et)),
	}
	if s, e := readN("start"), readN("end"); s > 0 && e >= s {
		res.DurationMS = (e - s) / 1e6
	} else {
		res.DurationMS = elapsed.Milliseconds()
	}
	if _, err := os.Stat(filepath.Join(out, "timedout")); err == nil {
		res.TimedOut, res.ExitCode = true, 124
	}
	st.finish(res)
	return res, nil
}

// streamState tracks what onChunk has been given.
type streamState struct {
	onChunk        func(sandbox.ExecChunk)
	outOff, errOff int64
}

func (s *streamState) stream() bool { return s != nil && s.onChunk != nil }

// live hands over a data event of the live stream.
func (s *streamState) live(stdout, stderr []byte) {
	s.feed("stdout", stdout)
	s.feed("stderr", stderr)
}

func (s *streamState) feed(stream string, data []byte) {
	if len(data) == 0 || !s.stream() {
		return
	}
	if stream == "stdout" {
		s.outOff += int64(len(data))
	} else {
		s.errOff += int64(len(data))
	}
	s.onChunk(sandbox.ExecChunk{Stream: stream, Data: data})
}

// finish hands over the rest of the result's streams not streamed yet.
func (s *streamState) finish(res sandbox.ExecResult) {
	if !s.stream() {
		return
	}
	if int64(len(res.Stdout)) > s.outOff {
		s.feed("stdout", res.Stdout[s.outOff:])
	}
	if int64(len(res.Stderr)) > s.errOff {
		s.feed("stderr", res.Stderr[s.errOff:])
	}
}

func newTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// transport is the replica.Transport over this runtime's envd.
func (r *Runtime) transport() replica.Transport { return envdTransportFor{r} }

type envdTransportFor struct{ r *Runtime }

func (t envdTransportFor) env(ctx context.Context) (*envdClient, error) {
	if env := t.r.envd(); env != nil {
		return env, nil
	}
	return t.r.ensure(ctx)
}

func (t envdTransportFor) Upload(ctx context.Context, local, remote string) error {
	env, err := t.env(ctx)
	if err != nil {
		return err
	}
	return t.r.gone(ctx, env.upload(ctx, local, remote))
}

func (t envdTransportFor) Download(ctx context.Context, remote, local string, limit int64) error {
	env, err := t.env(ctx)
	if err != nil {
		return err
	}
	return t.r.gone(ctx, env.download(ctx, remote, local, limit))
}

// Run runs a sync script as a followed process (a first sync of a large
// repository may outlast a stream), its exit code and output kept in files.
func (t envdTransportFor) Run(ctx context.Context, script string) (int, []byte, error) {
	env, err := t.env(ctx)
	if err != nil {
		return 0, nil, err
	}
	id := newTag()
	dir := path.Join(t.r.remoteState(), "run", id)
	wrapped := "mkdir -p " + replica.ShQuote(dir) + " || exit 93\n(\n" + script + "\n) > " + replica.ShQuote(dir+"/output") + " 2>&1\necho $? > " +
		replica.ShQuote(dir+"/exit") + "\nexit \"$(cat " + replica.ShQuote(dir+"/exit") + ")\"\n"
	tag := TagRun + id
	s, stop, err := env.start(ctx, tag, []string{"/bin/sh", "-c", wrapped}, "")
	if err != nil {
		return 0, nil, t.r.gone(ctx, err)
	}
	var code int
	f := follow{r: t.r, tag: tag, until: time.Now().Add(2 * time.Hour)}
	end := make(chan int, 1)
	wrap := s.next
	s.next = func() (*processEvent, bool) {
		ev, ok := wrap()
		if ok && ev.GetEnd() != nil {
			end <- exitCodeOf(ev.GetEnd())
		}
		return ev, ok
	}
	ferr := f.run(ctx, s, stop)
	if ferr != nil && !errors.Is(ferr, errEnded) {
		return 0, nil, ferr
	}
	env = t.r.envd()
	if env == nil {
		return 0, nil, sandbox.Errorf(sandbox.ErrNotFound, "e2b: runtime %s: its sandbox vanished", t.r.id)
	}
	select {
	case code = <-end:
	default:
		// The end was not seen (a broken stream): the exit file says.
		b, err := t.fetch(ctx, env, dir+"/exit", 64)
		if err != nil {
			return 0, nil, err
		}
		if code, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return 0, nil, sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "e2b: the sync script left no exit status")
		}
	}
	var out []byte
	if code != 0 {
		out, _ = t.fetch(ctx, env, dir+"/output", 64<<10)
	}
	if err := env.remove(ctx, dir); err != nil {
		t.r.p.log.Debug("e2b: remove a sync run's directory", "runtime", t.r.id, "error", err)
	}
	return code, out, nil
}

func (t envdTransportFor) fetch(ctx context.Context, env *envdClient, remote string, limit int64) ([]byte, error) {
	f, err := os.CreateTemp("", "sandboxcore-fetch-")
	if err != nil {
		return nil, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "e2b: temp file")
	}
	f.Close()
	defer os.Remove(f.Name())
	if err := env.download(ctx, remote, f.Name(), limit); err != nil {
		return nil, err
	}
	return os.ReadFile(f.Name())
}
