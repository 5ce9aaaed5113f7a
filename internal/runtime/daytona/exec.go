package daytona

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	toolbox "github.com/daytonaio/daytona/libs/toolbox-api-client-go"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A command runs in the sandbox as a detached wrapper (setsid) started by a
// toolbox /process/execute request that then waits for it at most
// Options.WaitSlice; later requests wait again, so no request nears the
// 60 s cut of Daytona's proxy however long the command runs, while its
// own timeout is enforced in the sandbox (the wrapper's watchdog kills the
// command's process group and session). The wrapper applies the replica
// pass, runs the command with stdout and stderr into capped head/tail files
// (through fifos, so nothing unbounded lands on the sandbox's disk), collects
// the pass and packs everything into one archive that one download brings
// back: an exec costs one execute request and one download (plus one upload
// when the host changed something or stdin is given).

// script builds the wrapper of one exec (replica.Pass.CommandScript: the
// head files are the live view the waiter reads).
func (r *Runtime) script(p *replica.Pass, req sandboxapi.ExecRequest) string {
	env := procexec.EnvList(procexec.BaseEnv(r.home()), r.held.Env(), req.Env)
	return p.CommandScript("", false, env, req)
}

// Exec runs one command (ExecStream without streaming).
func (r *Runtime) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// ExecStream (docs/DESIGN.md "Ports"; docs/API.md "exec") syncs the replica,
// runs req.Cmd (an argv) in the sandbox in the workdir or req.Cwd below it,
// syncs back what it changed and returns its result; onChunk, when set,
// receives the first half of each stream's cap as it is written (calls are
// serialized), the result always holds head and tail.
//
// Results, not errors: a non-zero exit; 127 (not found) and 126 (not
// executable) from sh; 128+n when killed by signal n; 124 with TimedOut
// after req.Timeout(), the command's process group and session killed in
// the sandbox. Output caps as on every runtime (head and tail, Truncated,
// full counts).
//
// Errors: sandboxapi.ErrInvalidArgument (a bad request: nothing runs; a cwd
// that is missing, not a directory or leads out of the workdir in the
// sandbox); sandboxapi.ErrRuntimeUnavailable (Daytona or the sandbox failed;
// wrapping context.Canceled when ctx was cancelled: the command is killed
// and what it changed is still synced back); sandboxapi.ErrTimeout (ctx's
// deadline); the kinds of mapErr. The checks before anything is sent are
// replica.SpecReplica.Exec's.
func (r *Runtime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	return r.held.Exec(req, onChunk, func(rep *replica.Replica) (sandboxapi.ExecResult, error) {
		return rep.RunCommand(ctx, replica.Command{
			Kind: Kind, Runtime: r.id, Log: r.p.log,
			Prepare: func(ctx context.Context) error {
				if _, err := r.ensure(ctx); err != nil {
					return err
				}
				replica.ClearHibernated(r.p.stateDir(r.id))
				return nil
			},
			RunPass: func(ctx context.Context, p *replica.Pass) (sandboxapi.ExecResult, replica.Outcome, error) {
				return r.execPass(ctx, p, req, onChunk)
			},
			Transport: r.transport,
		})
	})
}

// execPass runs one pass with the command in it: its inputs uploaded, the
// wrapper launched and waited for, its result collected.
func (r *Runtime) execPass(ctx context.Context, p *replica.Pass, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, replica.Outcome, error) {
	start := time.Now()
	if err := r.uploadInputs(ctx, p, req.Stdin); err != nil {
		return sandboxapi.ExecResult{}, replica.Applied, err
	}
	script := r.script(p, req)
	r.mu.Lock()
	prev := r.lastPass
	r.lastPass = ""
	r.mu.Unlock()
	st := replica.NewStream(onChunk)
	cancelled, err := r.await(ctx, p.Dir(), script, prev, st, req.Timeout())
	if err != nil {
		return sandboxapi.ExecResult{}, replica.Applied, err
	}
	dctx := ctx
	if cancelled {
		var c context.CancelFunc
		dctx, c = context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
	}
	return p.CollectCommand(dctx, replica.Collect{
		Kind: Kind, Runtime: r.id, Log: r.p.log, Cancelled: cancelled, Started: start,
		Download: func(dctx context.Context, local string, limit int64) error {
			if err := r.download(dctx, p.ResultPath(), local, limit); err != nil {
				return r.gone(ctx, err)
			}
			r.mu.Lock()
			if r.lastPass == "" {
				r.lastPass = p.Dir() // removed by the next launch
			}
			r.mu.Unlock()
			return nil
		},
	}, req, st)
}

// uploadInputs uploads the parts of pass p and, when stdin is not nil, the
// command's stdin to $P/stdin.
// Errors: sandboxapi.ErrRuntimeUnavailable (a temp file); those of upload.
func (r *Runtime) uploadInputs(ctx context.Context, p *replica.Pass, stdin []byte) error {
	for _, part := range p.Parts() {
		if err := r.upload(ctx, part.Local, part.Remote); err != nil {
			return err
		}
	}
	if stdin == nil {
		return nil
	}
	f, err := os.CreateTemp("", "sandboxcore-stdin-")
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: stdin")
	}
	_, werr := f.Write(stdin)
	f.Close()
	defer os.Remove(f.Name())
	if werr != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, werr, "daytona: stdin")
	}
	return r.upload(ctx, f.Name(), path.Join(p.Dir(), "stdin"))
}

// await launches the wrapper script in dir and waits for its done file,
// slice after slice. When ctx ends first the command is killed (cancel)
// and waited for on a fresh context; cancelled then reports it. The
// command's own timeout is enforced in the sandbox; the host gives up only
// two minutes after it (a sandbox that stopped answering).
// Errors: sandboxapi.ErrRuntimeUnavailable (that give-up); those of launch and
// wait, through gone.
func (r *Runtime) await(ctx context.Context, dir, script, prev string, st *replica.Stream, timeout time.Duration) (cancelled bool, err error) {
	hostLimit := time.Now().Add(timeout + 2*time.Minute)
	done, err := r.launch(ctx, dir, script, prev, st)
	if err != nil && ctx.Err() != nil {
		// Cancelled during the first wait: kill the command, then collect.
		cancelled, err = true, nil
		r.cancel(dir)
	}
	for err == nil && !done {
		if ctx.Err() != nil && !cancelled {
			cancelled = true
			r.cancel(dir)
		}
		if time.Now().After(hostLimit) {
			return cancelled, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: runtime %s: the command did not finish %v after its timeout", r.id, 2*time.Minute)
		}
		wctx := ctx
		if cancelled {
			var c context.CancelFunc
			wctx, c = context.WithTimeout(context.Background(), 15*time.Second)
			defer c()
		}
		done, err = r.wait(wctx, dir, st)
		if err != nil && ctx.Err() != nil && !cancelled {
			cancelled, err = true, nil
			r.cancel(dir)
		}
	}
	if err != nil {
		return cancelled, r.gone(ctx, err)
	}
	return cancelled, nil
}

// gone turns a failure of the sandbox under a command into ErrNotFound when
// the sandbox vanished (so that the caller recreates it), else keeps it.
func (r *Runtime) gone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	sb, gerr := r.p.getSandbox(ctx, r.id)
	if gerr == nil && (sb == nil || runtimeState(sb.GetState()) == sandbox.RuntimeMissing) {
		return sandboxapi.Wrap(sandboxapi.ErrNotFound, err, "daytona: runtime %s vanished under the command", r.id)
	}
	if gerr == nil && runtimeState(sb.GetState()) != sandbox.RuntimeRunning {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: runtime %s is %s: the command was interrupted", r.id, sb.GetState())
	}
	return err
}

// waiterScript waits (at most slice) for the pass's done file; when streaming,
// it returns early with new head bytes. Output: "done"|"running", then the
// base64 of new stdout and stderr bytes on one line each.
func waiterScript(dir string, slice time.Duration, st *replica.Stream) string {
	stream := 0
	var oo, eo int64
	if st.Streaming() {
		stream = 1
		oo, eo = st.Offsets()
	}
	return fmt.Sprintf(`exec 2>/dev/null
P=%s; MAXW=%d; OO=%d; EO=%d; ST=%d
w=0; d=1
while [ ! -e "$P/done" ]; do
	if [ "$ST" = 1 ]; then
		so=$(wc -c < "$P/out/o.head" 2>/dev/null || echo 0); se=$(wc -c < "$P/out/e.head" 2>/dev/null || echo 0)
		{ [ "$so" -gt "$OO" ] || [ "$se" -gt "$EO" ]; } && break
	fi
	[ "$w" -ge "$MAXW" ] && break
	case $d in 1) s=0.01; c=1; d=2 ;; 2) s=0.02; c=2; d=5 ;; 5) s=0.05; c=5; d=10 ;; *) s=0.1; c=10 ;; esac
	[ "$ST" = 1 ] && [ "$d" -ge 10 ] && { s=0.1; c=10; }
	sleep "$s"; w=$((w + c))
done
if [ -e "$P/done" ]; then echo SANDBOXCORE-WAIT done; else echo SANDBOXCORE-WAIT running; fi
if [ "$ST" = 1 ]; then
	printf 'SANDBOXCORE-OUT '; tail -c +$((OO + 1)) "$P/out/o.head" | head -c 262144 | base64 -w0; echo
	printf 'SANDBOXCORE-ERR '; tail -c +$((EO + 1)) "$P/out/e.head" | head -c 262144 | base64 -w0; echo
fi
`, replica.ShQuote(dir), int(slice/(10*time.Millisecond)), oo, eo, stream)
}

// launch starts the wrapper (once: a retried launch only waits) and waits
// for it like wait.
func (r *Runtime) launch(ctx context.Context, dir, script, prev string, st *replica.Stream) (bool, error) {
	marker := "SANDBOXCORE_EOF_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var b strings.Builder
	if prev != "" && prev != dir {
		fmt.Fprintf(&b, "rm -rf %s 2>/dev/null\n", replica.ShQuote(prev))
	}
	fmt.Fprintf(&b, "mkdir -p %s || exit 1\nif mkdir %s 2>/dev/null; then\ncat > %s <<'%s'\n%s\n%s\nsetsid sh %s </dev/null >/dev/null 2>&1 &\nfi\n",
		replica.ShQuote(dir), replica.ShQuote(dir+"/launched"), replica.ShQuote(dir+"/run.sh"), marker, script, marker, replica.ShQuote(dir+"/run.sh"))
	b.WriteString(waiterScript(dir, r.p.opts.WaitSlice, st))
	return r.waitCall(ctx, b.String(), st)
}

// wait waits for the wrapper in dir at most one slice.
func (r *Runtime) wait(ctx context.Context, dir string, st *replica.Stream) (bool, error) {
	return r.waitCall(ctx, waiterScript(dir, r.p.opts.WaitSlice, st), st)
}

func (r *Runtime) waitCall(ctx context.Context, script string, st *replica.Stream) (bool, error) {
	var res *toolbox.ExecuteResponse
	err := r.p.retry(ctx, "execute in "+r.id, func(cctx context.Context) error {
		tb, _ := r.client()
		if tb == nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: runtime %s is not started", r.id)
		}
		c, cancel := context.WithTimeout(ctx, r.p.opts.WaitSlice+30*time.Second)
		defer cancel()
		body := toolbox.NewExecuteRequest(underSh(script))
		body.SetTimeout(int32((r.p.opts.WaitSlice + 20*time.Second) / time.Second))
		var resp *http.Response
		var err error
		res, resp, err = tb.ProcessAPI.ExecuteCommand(c).Request(*body).Execute()
		return r.p.mapErr(c, resp, err, "execute in %s", r.id)
	})
	if err != nil {
		return false, err
	}
	if res.GetExitCode() != 0 {
		return false, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: the command's launcher failed (%d): %s", res.GetExitCode(), sandboxapi.Clip(r.p.scrub(res.GetResult()), 300))
	}
	sc := bufio.NewScanner(strings.NewReader(res.GetResult()))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	// Only the waiter's own tagged lines count (the output is sh's combined
	// stdout and stderr).
	state := ""
	var o, e []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "SANDBOXCORE-WAIT "):
			state = strings.TrimPrefix(line, "SANDBOXCORE-WAIT ")
		case strings.HasPrefix(line, "SANDBOXCORE-OUT "):
			o, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(line, "SANDBOXCORE-OUT "))
		case strings.HasPrefix(line, "SANDBOXCORE-ERR "):
			e, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(line, "SANDBOXCORE-ERR "))
		}
	}
	if state == "" {
		return false, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: no answer from the command's waiter")
	}
	st.Live(o, e)
	return state == "done", nil
}

// underSh returns the command that has the toolbox run script with
// /bin/sh, whatever its own shell: Daytona's daemon feeds a command to the
// first of zsh and bash that the sandbox's /etc/shells lists, else to
// $SHELL, else to sh (apps/daemon/pkg/toolbox/process/execute.go:55-58,
// apps/daemon/pkg/common/get_shell.go:14-48 of daytonaio/daytona
// v0.190.0) — zsh on Daytona's default snapshot, whose rules are not sh's
// (no word splitting of an unquoted $var, errors for globs that match
// nothing, …). The scripts are written for sh: the command execs sh on a
// here-document whose quoted delimiter makes every one of those shells
// pass the script on as it is.
func underSh(script string) string {
	marker := "SANDBOXCORE_SH_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for strings.Contains(script, marker) {
		marker += "_"
	}
	return "exec /bin/sh -s <<'" + marker + "'\n" + script + "\n" + marker + "\n"
}

// cancel kills the command of a pass (the caller's context ended).
func (r *Runtime) cancel(dir string) {
	ctx, c := context.WithTimeout(context.Background(), 15*time.Second)
	defer c()
	script := replica.CancelScript(dir)
	if _, _, err := r.run(ctx, script); err != nil {
		r.p.log.Warn("daytona: kill a cancelled command", "runtime", r.id, "error", err)
	}
}

// run executes a short script synchronously (not a command's wrapper).
func (r *Runtime) run(ctx context.Context, script string) (int, []byte, error) {
	var res *toolbox.ExecuteResponse
	err := r.p.retry(ctx, "execute in "+r.id, func(cctx context.Context) error {
		tb, _ := r.client()
		if tb == nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: runtime %s is not started", r.id)
		}
		body := toolbox.NewExecuteRequest(underSh(script))
		body.SetTimeout(50)
		var resp *http.Response
		var err error
		res, resp, err = tb.ProcessAPI.ExecuteCommand(cctx).Request(*body).Execute()
		return r.p.mapErr(cctx, resp, err, "execute in %s", r.id)
	})
	if err != nil {
		return 0, nil, err
	}
	return int(res.GetExitCode()), []byte(res.GetResult()), nil
}

// upload copies a host file into the sandbox.
func (r *Runtime) upload(ctx context.Context, local, remote string) error {
	return r.p.retry(ctx, "upload to "+r.id, func(cctx context.Context) error {
		tb, _ := r.client()
		if tb == nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: runtime %s is not started", r.id)
		}
		f, err := os.Open(local)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: upload")
		}
		_, resp, err := tb.FileSystemAPI.UploadFile(cctx).Path(remote).File(f).Execute()
		return r.p.mapErr(cctx, resp, err, "upload to %s", r.id)
	})
}

// download copies a sandbox file to the host, at most limit bytes
// (sandboxapi.ErrResourceLimit beyond), streaming it to the file: results
// run up to replica's 2 GiB. It is the toolbox's GET /files/download?path=
// sent by hand, because the generated client's DownloadFile reads the whole
// body into memory and writes it to a temporary file before returning it
// (api_file_system.go:508 and client.go:453-484 of
// toolbox-api-client-go v0.190.0): the limit would apply only after that.
func (r *Runtime) download(ctx context.Context, remote, local string, limit int64) error {
	return r.p.retry(ctx, "download from "+r.id, func(cctx context.Context) error {
		tb, _ := r.client()
		if tb == nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: runtime %s is not started", r.id)
		}
		cfg := tb.GetConfig()
		u := strings.TrimSuffix(cfg.Servers[0].URL, "/") + "/files/download?" + url.Values{"path": {remote}}.Encode()
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: download")
		}
		req.Header.Set("Accept", "application/octet-stream")
		req.Header.Set("User-Agent", cfg.UserAgent)
		resp, err := cfg.HTTPClient.Do(req)
		if err != nil {
			return r.p.mapErr(cctx, nil, err, "download from %s", r.id)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			return r.p.mapErr(cctx, resp, answerError{resp.Status, body}, "download from %s", r.id)
		}
		out, err := os.Create(local)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: download")
		}
		n, err := io.Copy(out, io.LimitReader(resp.Body, limit+1))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if cctx.Err() != nil {
				return r.p.mapErr(cctx, nil, err, "download from %s", r.id)
			}
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: download from %s: %s", r.id, r.p.scrub(err.Error()))
		}
		if n > limit {
			return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "daytona: %s exceeds %d bytes", remote, limit)
		}
		return nil
	})
}

// answerError is a refused answer's status and body, as the generated
// clients' errors carry them (errorMessage reads Body).
type answerError struct {
	status string
	body   []byte
}

func (e answerError) Error() string { return e.status }

// Body is the answer's body.
func (e answerError) Body() []byte { return e.body }

// transport is the replica.Transport over this runtime's toolbox.
func (r *Runtime) transport() replica.Transport { return toolboxTransport{r} }

type toolboxTransport struct{ r *Runtime }

func (t toolboxTransport) Upload(ctx context.Context, local, remote string) error {
	return t.r.upload(ctx, local, remote)
}

func (t toolboxTransport) Download(ctx context.Context, remote, local string, limit int64) error {
	return t.r.download(ctx, remote, local, limit)
}

// Run runs a sync script detached, like a command, so it may take longer
// than one request (a first sync of a large repository).
func (t toolboxTransport) Run(ctx context.Context, script string) (int, []byte, error) {
	dir := path.Join(t.r.remoteState(), "run", strconv.FormatInt(time.Now().UnixNano(), 36))
	wrapped := "(\n" + script + "\n) > " + replica.ShQuote(dir+"/output") + " 2>&1\necho $? > " + replica.ShQuote(dir+"/exit") + "\n: > " + replica.ShQuote(dir+"/done") + "\n"
	st := replica.NewStream(nil)
	done, err := t.r.launch(ctx, dir, wrapped, "", st)
	for err == nil && !done {
		done, err = t.r.wait(ctx, dir, st)
	}
	if err != nil {
		return 0, nil, err
	}
	code, out, err := t.r.run(ctx, fmt.Sprintf("cat %s; echo; tail -c 2000 %s; rm -rf %s", replica.ShQuote(dir+"/exit"), replica.ShQuote(dir+"/output"), replica.ShQuote(dir)))
	if err != nil {
		return 0, nil, err
	}
	if code != 0 {
		return code, out, nil
	}
	first, rest, _ := bytes.Cut(out, []byte("\n"))
	n, perr := strconv.Atoi(strings.TrimSpace(string(first)))
	if perr != nil {
		return 0, nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: the sync script left no exit status")
	}
	return n, rest, nil
}
