package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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

// script builds the wrapper of one exec (replica.Pass.CommandScript: the
// head of each stream goes to fds 5 and 6, the wrapper's stdout and stderr
// that envd streams; prev, when set, is an earlier pass's directory to
// remove).
func (r *Runtime) script(p *replica.Pass, req sandboxapi.ExecRequest, prev string) string {
	env := procexec.EnvList(procexec.BaseEnv(r.home()), r.held.Env(), req.Env)
	pre := "exec 5>&1 6>&2 >/dev/null 2>&1\n"
	if prev != "" {
		pre += fmt.Sprintf("rm -rf %s\n", replica.ShQuote(prev))
	}
	return p.CommandScript(pre, true, env, req)
}

// Exec runs one command (ExecStream without streaming).
func (r *Runtime) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
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
// A command runs only in an instance of the sandbox with room for its whole
// timeout before E2B's max instance length (instance.go): when the current
// one has not, the sandbox is paused and resumed first.
//
// Errors: sandboxapi.ErrInvalidArgument (a bad request: nothing runs; a cwd
// that is missing, not a directory or leads out of the workdir in the
// sandbox; a timeout no instance has room for); sandboxapi.ErrRuntimeUnavailable (E2B or the sandbox failed;
// wrapping context.Canceled when ctx was cancelled: the command is killed
// and what it changed is still synced back); sandboxapi.ErrTimeout (ctx's
// deadline); the kinds of mapHTTP and mapConnect. The checks before
// anything is sent are replica.SpecReplica.Exec's.
func (r *Runtime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	return r.held.Exec(req, onChunk, func(rep *replica.Replica) (sandboxapi.ExecResult, error) {
		if err := r.enter(ctx); err != nil {
			return sandboxapi.ExecResult{}, err
		}
		defer r.leave()
		var env *envdClient
		admitted := false // to the sandbox's instance (instance.go)
		defer func() {
			if admitted {
				r.release()
			}
		}()
		return rep.RunCommand(ctx, replica.Command{
			Kind: Kind, Runtime: r.id, Log: r.p.log,
			Prepare: func(ctx context.Context) error {
				var err error
				if env, err = r.prepare(ctx, req.Timeout(), &admitted); err != nil {
					return err
				}
				replica.ClearHibernated(r.p.stateDir(r.id))
				return nil
			},
			RunPass: func(ctx context.Context, p *replica.Pass) (sandboxapi.ExecResult, replica.Outcome, error) {
				return r.execPass(ctx, env, p, req, onChunk)
			},
			Transport: r.transport,
		})
	})
}

// execPass runs one pass with the command in it: its inputs uploaded, the
// wrapper started as a process and followed to its end, its result
// collected.
func (r *Runtime) execPass(ctx context.Context, env *envdClient, p *replica.Pass, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, replica.Outcome, error) {
	start := time.Now()
	if err := r.uploadInputs(ctx, env, p, req.Stdin); err != nil {
		return sandboxapi.ExecResult{}, replica.Applied, err
	}
	r.mu.Lock()
	prev := r.lastPass
	r.lastPass = ""
	r.mu.Unlock()
	argv, err := r.wrapperArgv(ctx, env, p, r.script(p, req, prev))
	if err != nil {
		return sandboxapi.ExecResult{}, replica.Applied, err
	}
	tag := TagExec + path.Base(p.Dir())
	st := replica.NewStream(onChunk)
	// The command's own timeout is enforced in the sandbox; the host gives
	// up only well after it (a sandbox that stopped answering).
	until := time.Now().Add(req.Timeout() + 2*time.Minute)
	s, stop, err := env.start(ctx, tag, argv, "")
	if err != nil {
		return sandboxapi.ExecResult{}, replica.Applied, r.gone(ctx, err)
	}
	f := follow{r: r, tag: tag, until: until, onData: st.Live}
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
		return sandboxapi.ExecResult{}, replica.Applied, ferr
	}
	return p.CollectCommand(ctx, replica.Collect{
		Kind: Kind, Runtime: r.id, Log: r.p.log, Cancelled: cancelled, Started: start,
		Download: func(ctx context.Context, local string, limit int64) error {
			return r.downloadResult(ctx, p, local, limit, f.started)
		},
	}, req, st)
}

// uploadInputs uploads the parts of pass p and, when stdin is not nil, the
// command's stdin to $P/stdin. Errors: those of upload, through gone.
func (r *Runtime) uploadInputs(ctx context.Context, env *envdClient, p *replica.Pass, stdin []byte) error {
	for _, part := range p.Parts() {
		if err := env.upload(ctx, part.Local, part.Remote); err != nil {
			return r.gone(ctx, err)
		}
	}
	if stdin != nil {
		if err := r.uploadBytes(ctx, env, stdin, path.Join(p.Dir(), "stdin")); err != nil {
			return r.gone(ctx, err)
		}
	}
	return nil
}

// maxArgBytes is the longest wrapper passed as an argument (below Linux's
// MAX_ARG_STRLEN, 128 KiB); a longer one is uploaded as a file.
const maxArgBytes = 96 << 10

// wrapperArgv returns the argv that runs script: sh -c script, or, beyond
// maxArgBytes, sh $P/run.sh with the script uploaded there.
// Errors: those of the upload, through gone.
func (r *Runtime) wrapperArgv(ctx context.Context, env *envdClient, p *replica.Pass, script string) ([]string, error) {
	if len(script) <= maxArgBytes {
		return []string{"/bin/sh", "-c", script}, nil
	}
	f := path.Join(p.Dir(), "run.sh")
	if err := r.uploadBytes(ctx, env, []byte(script), f); err != nil {
		return nil, r.gone(ctx, err)
	}
	return []string{"/bin/sh", f}, nil
}

// downloadResult brings pass p's result archive to local (at most limit
// bytes) from the current sandbox and marks the pass for removal by the
// next command's wrapper. started: the wrapper was seen running.
// Errors: sandboxapi.ErrRuntimeUnavailable (the sandbox was lost; no result
// and the wrapper never started: nothing ran); those of download, through
// gone.
func (r *Runtime) downloadResult(ctx context.Context, p *replica.Pass, local string, limit int64, started bool) error {
	env := r.envd()
	if env == nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: runtime %s lost its sandbox", r.id)
	}
	if err := env.download(ctx, p.ResultPath(), local, limit); err != nil {
		if errors.Is(err, errNoFile) && !started {
			// envd never started the wrapper (the Start stream failed before
			// its start event, and no process has the tag): nothing ran.
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: runtime %s: the command could not be started", r.id)
		}
		return r.gone(ctx, err)
	}
	r.mu.Lock()
	if r.lastPass == "" {
		r.lastPass = p.Dir() // removed by the next command's wrapper
	}
	r.mu.Unlock()
	return nil
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
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: temp file")
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, werr, "e2b: temp file")
	}
	return env.upload(ctx, f.Name(), remote)
}

// gone turns a failure of an envd call into sandboxapi.ErrNotFound when the
// sandbox vanished (the caller recreates it); a paused one is resumed and
// the failure returned as retryable.
func (r *Runtime) gone(ctx context.Context, err error) error {
	if ctx.Err() != nil || sandboxapi.KindOf(err) != sandboxapi.ErrRuntimeUnavailable || errors.Is(err, errNoFile) {
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
// lives on); sandboxapi.ErrNotFound (the sandbox vanished);
// sandboxapi.ErrRuntimeUnavailable (no stream could be had until f.until).
func (f *follow) run(ctx context.Context, s *stream, stop context.CancelFunc) error {
	keep := 3 * f.r.p.opts.Keepalive
	for {
		// A stream opened by tag after one that showed the process
		// started: "no such process" then means it ended meanwhile.
		byTag, startedBefore := s == nil, f.started
		if s == nil {
			if time.Now().After(f.until) {
				return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: runtime %s: the command did not finish %v after its timeout", f.r.id, 2*time.Minute)
			}
			env := f.r.envd()
			if env == nil {
				return sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: runtime %s: its sandbox vanished", f.r.id)
			}
			var err error
			s, stop, err = env.connectTag(ctx, f.tag)
			if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
				return errEnded
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctxErr(ctx, "follow the command")
				}
				if gerr := f.r.gone(ctx, err); sandboxapi.KindOf(gerr) == sandboxapi.ErrNotFound {
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
		mapped := f.r.p.mapConnect(ctx, err, "follow process "+f.tag)
		if byTag && startedBefore && sandboxapi.KindOf(mapped) == sandboxapi.ErrNotFound {
			// A Connect stream says "no such process" on its first read,
			// not when it is opened: the process ended before the stream
			// reached it, as when connectTag itself says so. (One never
			// seen started may not have started at all: a sandbox paused
			// under the start; the caller decides.)
			return errEnded
		}
		if sandboxapi.KindOf(mapped) != sandboxapi.ErrRuntimeUnavailable {
			return mapped // envd's decision (an access token refused, …), not a cut
		}
		// The stream broke: follow the process again by its tag. What was
		// streamed so far stays; the rest comes from the result.
		f.r.p.log.Debug("e2b: a process stream ended early; reconnecting", "runtime", f.r.id, "tag", f.tag, "error", err)
		f.onData = nil
		f.reconnects++
		s = nil
		if gerr := f.r.gone(ctx, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: process stream")); sandboxapi.KindOf(gerr) == sandboxapi.ErrNotFound {
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
		return 0, nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: runtime %s: its sandbox vanished", t.r.id)
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
			return 0, nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: the sync script left no exit status")
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
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: temp file")
	}
	f.Close()
	defer os.Remove(f.Name())
	if err := env.download(ctx, remote, f.Name(), limit); err != nil {
		return nil, err
	}
	return os.ReadFile(f.Name())
}
