package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/filesystem"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/process"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/process/processconnect"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envdapi"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Header names of envd requests (E2B's SDKs send the same).
const (
	// HeaderAccessToken carries the sandbox's envd access token (envd.yaml AccessTokenAuth).
	HeaderAccessToken = "X-Access-Token"
	// HeaderSandboxID and HeaderSandboxPort route a request through E2B's sandbox proxy.
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	// HeaderKeepalive asks envd for a keepalive event on a silent stream every
	// so many seconds.
	HeaderKeepalive = "Keepalive-Ping-Interval"
	// HeaderTrafficToken authorizes requests to a private sandbox's ports (previews).
	HeaderTrafficToken = "E2b-Traffic-Access-Token"
)

// errNoFile: envd answered 404 for a file (the sandbox itself is there).
var errNoFile = errors.New("no such file in the sandbox")

// envdClient talks to envd in one sandbox.
type envdClient struct {
	p    *Provider
	rec  record
	base string
	hc   *http.Client
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
	file *envdapi.Client
}

// newEnvd builds the clients of rec's envd, at
// {scheme}://49983-{sandbox id}.{domain}.
func (p *Provider) newEnvd(rec record, runtimeID string) *envdClient {
	base := p.scheme + "://" + strconv.Itoa(EnvdPort) + "-" + rec.SandboxID + "." + rec.Domain
	hc := &http.Client{Transport: &envdTransport{rec: rec, user: p.opts.User, next: p.base}, CheckRedirect: replica.NoRedirect}
	file, _ := envdapi.NewClient(base, envdapi.WithHTTPClient(hc))
	return &envdClient{
		p: p, rec: rec, base: base, hc: hc, file: file,
		proc: processconnect.NewProcessClient(hc, base),
		fs:   filesystemconnect.NewFilesystemClient(hc, base),
	}
}

// envdTransport adds the sandbox's routing headers, access token and user
// to every envd request.
type envdTransport struct {
	rec  record
	user string
	next http.RoundTripper
}

func (t *envdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(HeaderSandboxID, t.rec.SandboxID)
	r.Header.Set(HeaderSandboxPort, strconv.Itoa(EnvdPort))
	if t.rec.AccessToken != "" {
		r.Header.Set(HeaderAccessToken, t.rec.AccessToken)
	}
	// envd runs the call as the user named by basic authentication.
	r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(t.user+":")))
	r.Header.Set("User-Agent", "sandboxcore")
	return t.next.RoundTrip(r)
}

// String never prints the token.
func (t *envdTransport) String() string { return "e2b-envd(" + t.rec.SandboxID + ", <redacted>)" }

// scrub removes the sandbox's tokens and the API key from a text.
func (e *envdClient) scrub(s string) string {
	for _, tok := range []string{e.rec.AccessToken, e.rec.TrafficToken} {
		if len(tok) >= 4 {
			s = strings.ReplaceAll(s, tok, "<redacted>")
		}
	}
	return e.p.scrub(s)
}

// upload copies the host file local into the sandbox at remote (POST
// /files, multipart; envd makes the parent directories).
func (e *envdClient) upload(ctx context.Context, local, remote string) error {
	return e.p.retry(ctx, "upload to "+e.rec.SandboxID, func(ctx context.Context) error {
		f, err := os.Open(local)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: upload")
		}
		defer f.Close()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			part, err := mw.CreateFormFile("file", path.Base(remote))
			if err == nil {
				_, err = io.Copy(part, f)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		user := e.p.opts.User
		resp, err := e.file.PostFilesWithBody(ctx, &envdapi.PostFilesParams{Path: &remote, Username: &user}, mw.FormDataContentType(), pr)
		_ = pr.CloseWithError(errors.New("request done"))
		return e.httpDone(ctx, resp, err, "upload to "+e.rec.SandboxID)
	})
}

// download copies the sandbox file remote to the host file local, at most
// limit bytes (sandboxapi.ErrResourceLimit). A missing file wraps errNoFile.
func (e *envdClient) download(ctx context.Context, remote, local string, limit int64) error {
	return e.p.retry(ctx, "download from "+e.rec.SandboxID, func(ctx context.Context) error {
		user := e.p.opts.User
		resp, err := e.file.GetFiles(ctx, &envdapi.GetFilesParams{Path: &remote, Username: &user})
		if err == nil && resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, errNoFile, "e2b: %s is missing in sandbox %s", remote, e.rec.SandboxID)
		}
		if err == nil && resp.StatusCode >= 400 {
			return e.httpDone(ctx, resp, nil, "download from "+e.rec.SandboxID)
		}
		if err != nil {
			return e.httpDone(ctx, nil, err, "download from "+e.rec.SandboxID)
		}
		defer resp.Body.Close()
		out, err := os.Create(local)
		if err != nil {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: download")
		}
		n, err := io.Copy(out, io.LimitReader(resp.Body, limit+1))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: download from %s: %s", e.rec.SandboxID, e.scrub(err.Error()))
		}
		if n > limit {
			return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "e2b: %s exceeds %d bytes", remote, limit)
		}
		return nil
	})
}

// httpDone maps an envd HTTP answer and closes its body.
func (e *envdClient) httpDone(ctx context.Context, resp *http.Response, err error, what string) error {
	var body []byte
	if resp != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	if err != nil {
		err = errors.New(e.scrub(err.Error()))
	}
	mapped := e.p.mapHTTP(ctx, resp, body, err, what)
	if mapped != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		// envd's 404 is about a path; a missing sandbox is the proxy's 502.
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, errNoFile, "e2b: %s", what)
	}
	return mapped
}

// makeDir creates a directory (and its parents) as the sandbox user
// (filesystem.Filesystem/MakeDir; an existing one is success).
func (e *envdClient) makeDir(ctx context.Context, dir string) error {
	return e.p.retry(ctx, "make directory in "+e.rec.SandboxID, func(ctx context.Context) error {
		_, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir}))
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			return nil
		}
		return e.p.mapConnect(ctx, e.scrubErr(err), "make directory in "+e.rec.SandboxID)
	})
}

// remove deletes a path in the sandbox (filesystem.Filesystem/Remove; a
// missing one is success).
func (e *envdClient) remove(ctx context.Context, p string) error {
	_, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: p}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil
	}
	return e.p.mapConnect(ctx, e.scrubErr(err), "remove in "+e.rec.SandboxID)
}

func (e *envdClient) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return connect.NewError(ce.Code(), errors.New(e.scrub(ce.Message())))
	}
	return errors.New(e.scrub(err.Error()))
}

// list returns the processes envd runs (process.Process/List).
func (e *envdClient) list(ctx context.Context) ([]*process.ProcessInfo, error) {
	var out []*process.ProcessInfo
	err := e.p.retry(ctx, "list processes in "+e.rec.SandboxID, func(ctx context.Context) error {
		res, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if err != nil {
			return e.p.mapConnect(ctx, e.scrubErr(err), "list processes in "+e.rec.SandboxID)
		}
		out = res.Msg.GetProcesses()
		return nil
	})
	return out, err
}

type processEvent = process.ProcessEvent

// stream is one server stream of process events (Start or Connect).
type stream struct {
	next  func() (*process.ProcessEvent, bool)
	err   func() error
	close func() error
}

// streamOf reads the process events of a Start or Connect response stream.
func streamOf[T any, PT interface {
	*T
	GetEvent() *process.ProcessEvent
}](s *connect.ServerStreamForClient[T]) *stream {
	return &stream{
		next: func() (*process.ProcessEvent, bool) {
			if !s.Receive() {
				return nil, false
			}
			return PT(s.Msg()).GetEvent(), true
		},
		err: s.Err, close: s.Close,
	}
}

// start starts a process tagged tag (process.Process/Start) without a
// deadline: envd kills a process when the Connect-Timeout-Ms of its Start
// passes, and the command's own timeout is enforced in the sandbox instead.
// The stream lives until cancel.
func (e *envdClient) start(ctx context.Context, tag string, argv []string, cwd string) (*stream, context.CancelFunc, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: map[string]string{}},
		Tag:     &tag,
		Stdin:   ptr(false),
	})
	if cwd != "" {
		req.Msg.Process.Cwd = &cwd
	}
	req.Header().Set(HeaderKeepalive, strconv.Itoa(int(e.p.opts.Keepalive/time.Second)))
	s, err := e.proc.Start(sctx, req)
	if err != nil {
		cancel()
		return nil, nil, e.p.mapConnect(ctx, e.scrubErr(err), "start a process in "+e.rec.SandboxID)
	}
	return streamOf(s), cancel, nil
}

// connectTag attaches to the running process tagged tag
// (process.Process/Connect); its output from now on comes with it.
// sandboxapi.ErrNotFound: no such process (it ended).
func (e *envdClient) connectTag(ctx context.Context, tag string) (*stream, context.CancelFunc, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req := connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}})
	req.Header().Set(HeaderKeepalive, strconv.Itoa(int(e.p.opts.Keepalive/time.Second)))
	s, err := e.proc.Connect(sctx, req)
	if err != nil {
		cancel()
		return nil, nil, e.p.mapConnect(ctx, e.scrubErr(err), "connect to process "+tag)
	}
	return streamOf(s), cancel, nil
}

// run runs a short script with sh and waits for it (at most apiTimeout),
// returning its exit code and combined output (for messages only).
func (e *envdClient) run(ctx context.Context, script string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var code int
	var out []byte
	err := e.p.retry(ctx, "run in "+e.rec.SandboxID, func(ctx context.Context) error {
		code, out = 0, nil
		s, stop, err := e.start(ctx, "sandboxcore-sh-"+newTag(), []string{"/bin/sh", "-c", script}, "")
		if err != nil {
			return err
		}
		defer stop()
		done := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				stop()
			case <-done:
			}
		}()
		defer close(done)
		for {
			ev, ok := s.next()
			if !ok {
				break
			}
			if d := ev.GetData(); d != nil {
				out = append(out, d.GetStdout()...)
				out = append(out, d.GetStderr()...)
			}
			if end := ev.GetEnd(); end != nil {
				code = exitCodeOf(end)
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctxErr(ctx, "run in "+e.rec.SandboxID)
		}
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: run in %s: the stream ended without the process's end: %s", e.rec.SandboxID, e.scrub(fmt.Sprint(s.err())))
	})
	return code, out, err
}

// exitCodeOf turns envd's end event into a shell-style exit code (128+n
// for a signal n).
func exitCodeOf(end *process.ProcessEvent_EndEvent) int {
	if end.GetExited() || end.GetExitCode() >= 0 {
		return int(end.GetExitCode())
	}
	// "signal: killed": ExitCode is -1 when a signal ended the process.
	for n, name := range map[int]string{9: "killed", 15: "terminated", 2: "interrupt", 6: "aborted", 11: "segmentation fault", 13: "broken pipe", 1: "hangup"} {
		if strings.Contains(end.GetStatus(), name) {
			return 128 + n
		}
	}
	return 128 + 9
}
