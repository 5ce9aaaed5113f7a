package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sandboxcore/sandboxcore/internal/certtest"
	"github.com/sandboxcore/sandboxcore/internal/devserver"
	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// Secured engine end to end (docs/SECURITY.md "Connecting to Temporal",
// "Payload encryption", "The codec server"): a worker that embeds Temporal
// with mutual TLS, clients over mTLS, encrypted history, key rotation, and
// the codec server the Web UI decodes with.

// testPKI holds the certificates of one test: a server CA and a client CA,
// and a third CA that signed nothing the server trusts.
type testPKI struct {
	serverCA, clientCA, otherCA          *certtest.CA
	serverCert, serverKey                string
	serverCAFile, clientCAFile, otherCAF string
	clientCert, clientKey                string // signed by clientCA
	strangerCert, strangerKey            string // a client certificate signed by otherCA
}

func newTestPKI(t *testing.T) *testPKI {
	dir := t.TempDir()
	p := &testPKI{serverCA: certtest.NewCA(t, "server CA"), clientCA: certtest.NewCA(t, "client CA"), otherCA: certtest.NewCA(t, "other CA")}
	p.serverCert, p.serverKey = p.serverCA.Issue(t, certtest.Options{CommonName: "embedded frontend"}).Write(t, dir, "server")
	p.clientCert, p.clientKey = p.clientCA.Issue(t, certtest.Options{CommonName: "sandbox-worker", Client: true}).Write(t, dir, "client")
	p.strangerCert, p.strangerKey = p.otherCA.Issue(t, certtest.Options{CommonName: "stranger", Client: true}).Write(t, dir, "stranger")
	p.serverCAFile, p.clientCAFile, p.otherCAF = p.serverCA.WriteCA(t, dir, "server-ca"), p.clientCA.WriteCA(t, dir, "client-ca"), p.otherCA.WriteCA(t, dir, "other-ca")
	return p
}

// newKeyFile writes a random payload key (base64) and returns its path.
func newKeyFile(t *testing.T, name string) string {
	t.Helper()
	b := make([]byte, payloadcodec.KeySize)
	_, err := rand.Read(b)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), name+".key")
	require.NoError(t, os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600))
	return p
}

// envOf is a lookup over a map (and nothing else: the test's own
// environment stays out, so does any Temporal CLI config file).
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return strconv.Itoa(p)
}

// markers that must never appear in Temporal's history in any form.
type markers struct{ path, content, stdout, message, missing string }

func newMarkers(t *testing.T) markers {
	n := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	return markers{
		path:    "platypus-path-" + n,
		content: "platypus-content-" + n + " secret file body\n",
		stdout:  "platypus-stdout-" + n,
		message: "platypus-commit-" + n,
		missing: "platypus-missing-" + n,
	}
}

func (m markers) all() []string { return []string{m.path, m.content, m.stdout, m.message, m.missing} }

// encodedForms are the ways a string can sit in a serialized payload: as it is, and
// inside base64 (JSON byte fields, protojson) at each of the three alignments.
func encodedForms(s string) []string {
	out := []string{s}
	for i := 0; i < 3; i++ {
		b := base64.StdEncoding.EncodeToString([]byte(s[i:]))
		out = append(out, b[4:len(b)-4])
	}
	return out
}

// rawHistory is every event of every run of wfID (following continue-as-new
// back to the first run) in binary, text and JSON form, read through the
// Temporal API with a client that has no codec.
func rawHistory(t *testing.T, c client.Client, wfID string) (events []proto.Message, all []byte) {
	t.Helper()
	runs := 0
	for runID := ""; ; runs++ {
		require.Less(t, runs, 50, "too many runs")
		var first *historypb.HistoryEvent
		it := c.GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if first == nil {
				first = ev
			}
			events = append(events, ev)
			b, err := proto.Marshal(ev)
			require.NoError(t, err)
			j, err := protojson.Marshal(ev)
			require.NoError(t, err)
			all = append(append(append(all, b...), []byte(ev.String())...), j...)
		}
		require.NotNil(t, first)
		if runID = first.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			return events, all
		}
	}
}

// eachPayload calls fn for every Payload inside m, telling whether it sits
// in search attributes (the one place payloads stay plaintext by design).
func eachPayload(m protoreflect.Message, inSearchAttrs bool, fn func(p *commonpb.Payload, inSearchAttrs bool)) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		fn(p, inSearchAttrs)
		return
	}
	if _, ok := m.Interface().(*commonpb.SearchAttributes); ok {
		inSearchAttrs = true
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				eachPayload(v.List().Get(i).Message(), inSearchAttrs, fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				eachPayload(mv.Message(), inSearchAttrs, fn)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			eachPayload(v.Message(), inSearchAttrs, fn)
		}
		return true
	})
}

// securedHost starts a worker host that embeds Temporal with mutual TLS
// (SANDBOX_TEMPORAL_TLS_*), dials it over mTLS with the standard TEMPORAL_TLS_*
// variables, and encrypts payloads (SANDBOX_PAYLOAD_KEYS). It returns the host
// and the client environment matching it.
func startSecuredHost(t *testing.T, name string, p *testPKI, keys string, logs io.Writer) (*hostworker.Host, map[string]string) {
	t.Helper()
	env := map[string]string{
		"SANDBOX_DATA_DIR": filepath.Join(t.TempDir(), "data"), "SANDBOX_HOST_ID": name, "SANDBOX_TASK_QUEUE": "q-" + name,
		"SANDBOX_ALLOW_FILE_URLS": "1", "SANDBOX_EVICTION_INTERVAL": "0",
		"SANDBOX_TEMPORAL_PORT": freePort(t), "SANDBOX_UI_PORT": freePort(t), "SANDBOX_CODEC_PORT": freePort(t),
		"SANDBOX_TEMPORAL_TLS_CERT": p.serverCert, "SANDBOX_TEMPORAL_TLS_KEY": p.serverKey, "SANDBOX_TEMPORAL_TLS_CLIENT_CA": p.clientCAFile,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": p.serverCAFile, "TEMPORAL_TLS_CLIENT_CERT_PATH": p.clientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": p.clientKey,
		"TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "no-temporal.toml"),
		"SANDBOX_PAYLOAD_KEYS": keys,
	}
	for _, k := range runtimeEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	cfg, err := hostworker.ConfigFromEnv(envOf(env))
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Credentials: creds, Logger: log})
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	if k := h.Activities.Runtimes.Kind(); k == "docker" || k == "bwrap" {
		t.Cleanup(func() { destroyRuntimes(h) })
	}
	require.NotNil(t, h.Dev, "the host embeds Temporal")
	client := with(env, "TEMPORAL_ADDRESS", h.Dev.Address)
	return h, client
}

func dialErr(t *testing.T, env map[string]string) error {
	t.Helper()
	sc, err := sandboxclient.Dial(ctxFor(t, 30*time.Second), sandboxclient.DialOptions{LookupEnv: envOf(env), Logger: quiet})
	if err == nil {
		sc.Close()
	}
	return err
}

// TestSecuredEngineOverMutualTLS: a session driven over mutual TLS against
// the embedded server; clients without a certificate, with a certificate
// from another CA, trusting another CA or speaking plaintext are refused with
// errors naming what to set; the raw history of the session — read through
// the Temporal API without the codec — holds none of the file's content,
// path, command output, commit message or error text, while the SDK reads
// all of it back; the Web UI's codec server decodes it for the token holder
// only; sandboxctl does the same with its --tls-* flags.
func TestSecuredEngineOverMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	keyFile := newKeyFile(t, "k1")
	logs := &lockedBuffer{}
	h, env := startSecuredHost(t, "mtls", p, "k1="+keyFile, logs)
	t.Cleanup(func() {
		// Nothing secret in the worker's debug log: no key, no token, no
		// private key, and none of the workspace content either.
		key, _ := os.ReadFile(keyFile)
		clientKey, _ := os.ReadFile(p.clientKey)
		token, _ := os.ReadFile(filepath.Join(h.Config.DataDir, "codec-token"))
		out := logs.String()
		require.NotEmpty(t, out)
		for name, secret := range map[string]string{"payload key": strings.TrimSpace(string(key)), "client key": string(clientKey[30:80]), "codec token": strings.TrimSpace(string(token))} {
			assert.NotContains(t, out, secret, "the %s is in the worker's log", name)
		}
		assert.NotContains(t, out, "PRIVATE KEY")
	})
	queue := h.Config.TaskQueue
	ctx := ctxFor(t, 3*time.Minute)

	sc, err := sandboxclient.Dial(ctx, sandboxclient.DialOptions{TaskQueue: queue, LookupEnv: envOf(env), Logger: quiet})
	require.NoError(t, err)
	defer sc.Close()

	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	m := newMarkers(t)
	user := uniq(t, "u")
	s, hd, err := sc.Acquire(ctx, editRequest(user, "p", "c1", gittest.FileURL(upstream)))
	require.NoError(t, err)
	file := "notes/" + m.path + ".txt"
	require.NoError(t, s.WriteFile(ctx, file, []byte(m.content), 0))
	got, err := s.ReadFile(ctx, file)
	require.NoError(t, err)
	assert.Equal(t, m.content, string(got), "the SDK reads back what it wrote")
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "cat " + file + "; echo " + m.stdout + "; echo " + m.stdout + " >&2"}})
	require.NoError(t, err)
	assert.Equal(t, m.content+m.stdout+"\n", string(res.Stdout))
	assert.Equal(t, m.stdout+"\n", string(res.Stderr))
	// Streamed output comes from the running exec's heartbeat details,
	// encrypted too: the client decodes them with its converter.
	var firstAt time.Time
	var streamed strings.Builder
	start := time.Now()
	sres, err := s.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo " + m.stdout + "-stream; sleep 3; echo done"}},
		func(c sandboxapi.ExecChunk) {
			if firstAt.IsZero() && strings.Contains(string(c.Data), m.stdout+"-stream") {
				firstAt = time.Now()
			}
			streamed.Write(c.Data)
		})
	ended := time.Now()
	require.NoError(t, err)
	assert.Equal(t, m.stdout+"-stream\ndone\n", string(sres.Stdout))
	assert.Equal(t, m.stdout+"-stream\ndone\n", streamed.String())
	require.False(t, firstAt.IsZero())
	assert.Less(t, firstAt.Sub(start), ended.Sub(start)-time.Second, "the first line arrives while the command still runs")
	d, err := s.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d.Patch, "+"+strings.TrimSuffix(m.content, "\n"))
	c, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: " + m.message})
	require.NoError(t, err)
	assert.False(t, c.NothingToCommit)
	_, err = s.ReadFile(ctx, m.missing+".txt")
	require.ErrorIs(t, err, sandboxapi.ErrFileNotFound, "typed errors survive encryption")
	assert.Contains(t, err.Error(), m.missing, "the SDK decodes the error message")
	list := listedSoon(t, sc, "SandboxUser = '"+user+"'", hd.WorkspaceID)
	assert.Equal(t, hd.WorkspaceID, list[0].Handle.WorkspaceID, "the memo (encrypted) is decoded with the client's converter")

	// The raw history, through a client over the same mTLS but without keys.
	raw, err := sandboxclient.Dial(ctx, sandboxclient.DialOptions{TaskQueue: queue, LookupEnv: envOf(with(env, "SANDBOX_PAYLOAD_KEYS", "")), Logger: quiet})
	require.NoError(t, err)
	defer raw.Close()
	events, all := rawHistory(t, raw.Temporal(), s.WorkflowID())
	require.NotEmpty(t, events)
	for _, mk := range m.all() {
		for _, f := range encodedForms(mk) {
			assert.False(t, bytes.Contains(all, []byte(f)), "%q (as %q) is in the raw history", mk, f)
		}
	}
	assert.True(t, bytes.Contains(all, []byte(user)), "control: the search attributes (the user id) are plaintext, so the search above can find strings")
	encrypted := 0
	codec, err := payloadcodec.FromEnv(envOf(env))
	require.NoError(t, err)
	var decoded []byte
	for _, ev := range events {
		eachPayload(ev.ProtoReflect(), false, func(pl *commonpb.Payload, inSA bool) {
			if payloadcodec.IsEncrypted(pl) {
				encrypted++
				assert.Equal(t, "k1", string(pl.Metadata[payloadcodec.MetadataKeyID]))
				out, err := codec.Decode([]*commonpb.Payload{pl})
				require.NoError(t, err)
				decoded = append(decoded, out[0].Data...)
				return
			}
			assert.True(t, inSA, "a payload outside search attributes is plaintext: %s", pl.String())
		})
	}
	assert.Greater(t, encrypted, 10)
	for _, mk := range []string{m.path, m.message, m.missing, m.stdout} {
		assert.Contains(t, string(decoded)+base64Forms(decoded), mk, "with the key, the history holds %q", mk)
	}
	desc, err := raw.Temporal().DescribeWorkflowExecution(ctx, s.WorkflowID(), "")
	require.NoError(t, err)
	for name, pl := range desc.GetWorkflowExecutionInfo().GetMemo().GetFields() {
		assert.True(t, payloadcodec.IsEncrypted(pl), "memo field %s is encrypted", name)
	}
	rs, err := raw.Session(hd.WorkspaceID)
	require.NoError(t, err)
	_, err = rs.ReadFile(ctx, file)
	require.Error(t, err, "a client without the keys cannot read the result")
	assert.Contains(t, err.Error(), "SANDBOX_PAYLOAD_KEYS")

	// Clients the server, or the client itself, must refuse.
	err = dialErr(t, with(env, "TEMPORAL_TLS_CLIENT_CERT_PATH", "", "TEMPORAL_TLS_CLIENT_KEY_PATH", ""))
	require.Error(t, err, "no client certificate")
	assert.Contains(t, err.Error(), "client certificate (mutual TLS): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH")
	err = dialErr(t, with(env, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", p.otherCAF))
	require.Error(t, err, "a CA that did not sign the server's certificate")
	assert.Contains(t, err.Error(), "is not signed by TEMPORAL_TLS_SERVER_CA_CERT_PATH ("+p.otherCAF+")")
	err = dialErr(t, with(env, "TEMPORAL_TLS_CLIENT_CERT_PATH", p.strangerCert, "TEMPORAL_TLS_CLIENT_KEY_PATH", p.strangerKey))
	require.Error(t, err, "a client certificate from a CA the server does not trust")
	assert.Regexp(t, "bad certificate|unknown certificate authority|broken pipe|connection reset", err.Error())
	err = dialErr(t, map[string]string{"TEMPORAL_ADDRESS": h.Dev.Address})
	require.Error(t, err, "plaintext to a TLS server")
	assert.Contains(t, err.Error(), "set TEMPORAL_TLS=true")

	t.Run("codec server for the Web UI", func(t *testing.T) {
		require.NotNil(t, h.Codec, "payloads are encrypted and the UI is on: the codec server runs")
		resp, err := http.Get(h.Dev.UIURL + "/api/v1/settings")
		require.NoError(t, err)
		var settings struct {
			Codec struct {
				Endpoint           string
				IncludeCredentials bool
				DefaultErrorLink   string
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&settings))
		resp.Body.Close()
		assert.Equal(t, h.Codec.URL, settings.Codec.Endpoint, "the embedded UI is pointed at it")
		assert.True(t, settings.Codec.IncludeCredentials)
		assert.Equal(t, h.Codec.URL+"/login", settings.Codec.DefaultErrorLink, "a refused decode links to the login page")

		// A payload as the UI holds it: from the UI's own API, whose
		// connection to the frontend goes over the server's internal TLS.
		resp, err = http.Get(h.Dev.UIURL + "/api/v1/namespaces/default/workflows?query=" + url.QueryEscape("SandboxUser = '"+user+"' AND ExecutionStatus = 'Running'"))
		require.NoError(t, err)
		var listed struct {
			Executions []struct {
				Memo struct {
					Fields map[string]json.RawMessage `json:"fields"`
				} `json:"memo"`
			} `json:"executions"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&listed))
		resp.Body.Close()
		require.Len(t, listed.Executions, 1)
		memo := listed.Executions[0].Memo.Fields["workspace"]
		require.NotEmpty(t, memo)
		assert.NotContains(t, string(memo), base64.StdEncoding.EncodeToString([]byte(`{"workspace_id"`))[:16], "the UI sees ciphertext")
		body := `{"payloads":[` + string(memo) + `]}`
		uiOrigin := h.Dev.UIURL
		post := func(auth func(*http.Request)) (int, string) {
			req, err := http.NewRequest(http.MethodPost, h.Codec.URL+"/decode?preserveStorageRefs=true", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Namespace", "default")
			req.Header.Set("Origin", uiOrigin)
			if auth != nil {
				auth(req)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, out := post(nil)
		assert.Equal(t, http.StatusUnauthorized, code, "refused without the token")
		assert.NotContains(t, out, hd.WorkspaceID)
		token, err := os.ReadFile(h.CodecTokenSource)
		require.NoError(t, err, "the token is in %s", h.CodecTokenSource)
		code, out = post(func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token))) })
		require.Equal(t, http.StatusOK, code, out)
		var dec commonpb.Payloads
		require.NoError(t, json.Unmarshal([]byte(out), &dec))
		require.Len(t, dec.Payloads, 1)
		assert.Contains(t, string(dec.Payloads[0].Data), `"workspace_id":"`+hd.WorkspaceID+`"`)

		// A browser: log in once, then the session cookie.
		login, err := http.PostForm(h.Codec.URL+"/login", url.Values{"token": {strings.TrimSpace(string(token))}})
		require.NoError(t, err)
		login.Body.Close()
		require.Len(t, login.Cookies(), 1)
		code, out = post(func(r *http.Request) { r.AddCookie(login.Cookies()[0]) })
		assert.Equal(t, http.StatusOK, code, out)
	})

	t.Run("sandboxctl over mTLS with its flags", func(t *testing.T) {
		bin := buildCLI(t)
		run := func(env []string, stdin string, args ...string) cliResult {
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			cmd.Stdin = strings.NewReader(stdin)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			return cliResult{code, o.String(), e.String()}
		}
		base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none.toml"),
			"SANDBOX_TASK_QUEUE=" + queue, "SANDBOX_PAYLOAD_KEYS=" + env["SANDBOX_PAYLOAD_KEYS"]}
		flags := []string{"--address", h.Dev.Address, "--tls-ca-path", p.serverCAFile, "--tls-cert-path", p.clientCert, "--tls-key-path", p.clientKey}
		r := run(base, "", append(flags, "read", hd.WorkspaceID, file)...)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, m.content, r.stdout)
		r = run(base, "from the CLI\n", append(flags, "write", hd.WorkspaceID, "notes/cli.txt")...)
		require.Equal(t, 0, r.code, r.stderr)
		got, err := s.ReadFile(ctx, "notes/cli.txt")
		require.NoError(t, err)
		assert.Equal(t, "from the CLI\n", string(got))

		r = run(base, "", "--address", h.Dev.Address, "--tls-ca-path", p.serverCAFile, "read", hd.WorkspaceID, file)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "TEMPORAL_TLS_CLIENT_CERT_PATH")
		r = run(base, "", "--address", h.Dev.Address, "--tls-ca-path", p.otherCAF, "--tls-cert-path", p.clientCert, "--tls-key-path", p.clientKey, "read", hd.WorkspaceID, file)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "is not signed by --tls-ca-path ("+p.otherCAF+")")
		r = run(append(base, "SANDBOX_PAYLOAD_KEYS="), "", append(flags, "read", hd.WorkspaceID, file)...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "the payloads are encrypted: set SANDBOX_PAYLOAD_KEYS")
		r = run(base, "", "--address", h.Dev.Address, "--tls-cert-path", p.clientCert, "read", hd.WorkspaceID, file)
		assert.Equal(t, 2, r.code, "a certificate without its key is a usage error")
		assert.Contains(t, r.stderr, "--tls-cert-path: a client certificate needs its key")

		// sandboxctl codec-server, as an operator runs it for a UI elsewhere.
		tokenFile := filepath.Join(t.TempDir(), "token")
		token := strings.Repeat("7", 48)
		require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
		listen := "127.0.0.1:" + freePort(t)
		cmd := exec.Command(bin, "codec-server", "--listen", listen, "--token-file", tokenFile, "--allow-origin", "http://ui.example:8080")
		cmd.Env = base
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		assert.Contains(t, line, "codec server http://"+listen)
		payloadBody := `{"payloads":[` + string(must(protojson.Marshal(firstEncrypted(t, events)))) + `]}`
		for _, c := range []struct {
			auth string
			code int
		}{{"", http.StatusUnauthorized}, {"Bearer " + strings.Repeat("8", 48), http.StatusUnauthorized}, {"Bearer " + token, http.StatusOK}} {
			req, err := http.NewRequest(http.MethodPost, "http://"+listen+"/decode", strings.NewReader(payloadBody))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", "http://ui.example:8080")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, c.code, resp.StatusCode, "auth %q: %s", c.auth, b)
			assert.Equal(t, "http://ui.example:8080", resp.Header.Get("Access-Control-Allow-Origin"))
			if c.code == http.StatusOK {
				var dec commonpb.Payloads
				require.NoError(t, json.Unmarshal(b, &dec))
				assert.False(t, payloadcodec.IsEncrypted(dec.Payloads[0]))
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func firstEncrypted(t *testing.T, events []proto.Message) *commonpb.Payload {
	t.Helper()
	var first *commonpb.Payload
	for _, ev := range events {
		eachPayload(ev.ProtoReflect(), false, func(p *commonpb.Payload, _ bool) {
			if first == nil && payloadcodec.IsEncrypted(p) {
				first = p
			}
		})
	}
	require.NotNil(t, first)
	return first
}

// base64Forms decodes the base64 strings of a JSON byte stream, so markers
// inside byte fields ([]byte content, stdout) can be found in decoded
// payloads.
func base64Forms(b []byte) string {
	var out strings.Builder
	for _, f := range bytes.FieldsFunc(b, func(r rune) bool { return r == '"' }) {
		if d, err := base64.StdEncoding.DecodeString(string(f)); err == nil {
			out.Write(d)
		}
	}
	return out.String()
}

// TestPayloadKeyRotation: a session written under one key stays readable —
// by the worker replaying it and by clients — after a new key is put first;
// new payloads use the new key; a codec without the old key refuses the old
// payloads naming the key. A session without keys is the control: its raw
// history holds the marker, so the searches here can fail.
func TestPayloadKeyRotation(t *testing.T) {
	oldKey, newKey := newKeyFile(t, "old"), newKeyFile(t, "new")
	codec := func(spec string) *payloadcodec.Codec {
		c, err := payloadcodec.FromEnv(envOf(map[string]string{payloadcodec.EnvKeys: spec}))
		require.NoError(t, err)
		return c
	}
	before, after, newOnly := codec("old="+oldKey), codec("new="+newKey+",old="+oldKey), codec("new="+newKey)
	dial := func(c *payloadcodec.Codec) client.Client {
		tc, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(quiet),
			DataConverter: c.DataConverter(), FailureConverter: c.FailureConverter()})
		require.NoError(t, err)
		t.Cleanup(tc.Close)
		return tc
	}
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 3*time.Minute)
	m := newMarkers(t)

	// Control: without keys the content is in the history.
	plainHost := startHost(t, "rot-plain")
	ps, _, err := plainHost.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c0", url))
	require.NoError(t, err)
	require.NoError(t, ps.WriteFile(ctx, "x.txt", []byte(m.content), 0))
	_, all := rawHistory(t, tc, ps.WorkflowID())
	found := false
	for _, f := range encodedForms(m.content) {
		found = found || bytes.Contains(all, []byte(f))
	}
	require.True(t, found, "control: a plaintext history holds the content")

	cfg := baseConfig(t, "rot")
	c1 := dial(before)
	h1, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: c1, Credentials: creds, Logger: quiet})
	require.NoError(t, err)
	sc1 := sandboxclient.New(c1, sandboxclient.Options{TaskQueue: cfg.TaskQueue, DataConverter: before.DataConverter()})
	user := uniq(t, "u")
	s1, hd, err := sc1.Acquire(ctx, editRequest(user, "p", "c1", url))
	require.NoError(t, err)
	require.NoError(t, s1.WriteFile(ctx, "old.txt", []byte(m.content), 0))
	h1.Stop()

	// The same host restarts with a new key first and the old one after it.
	c2 := dial(after)
	h2, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: c2, Credentials: creds, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(h2.Stop)
	sc2 := sandboxclient.New(c2, sandboxclient.Options{TaskQueue: cfg.TaskQueue, DataConverter: after.DataConverter()})
	s2, err := sc2.Session(hd.WorkspaceID)
	require.NoError(t, err)
	got, err := s2.ReadFile(ctx, "old.txt")
	require.NoError(t, err, "the session's run, written under the old key, goes on under the new one")
	assert.Equal(t, m.content, string(got))
	require.NoError(t, s2.WriteFile(ctx, "new.txt", []byte(m.stdout), 0))
	desc, err := s2.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, hd.WorkspaceID, desc.WorkspaceID)
	list := listedSoon(t, sc2, "SandboxUser = '"+user+"'", hd.WorkspaceID)
	assert.Equal(t, hd.WorkspaceID, list[0].Handle.WorkspaceID)

	events, all := rawHistory(t, tc, s2.WorkflowID())
	for _, mk := range []string{m.content, m.stdout} {
		for _, f := range encodedForms(mk) {
			assert.False(t, bytes.Contains(all, []byte(f)), "%q is in the raw history", mk)
		}
	}
	ids := map[string]int{}
	var oldPayload *commonpb.Payload
	for _, ev := range events {
		eachPayload(ev.ProtoReflect(), false, func(p *commonpb.Payload, inSA bool) {
			if !payloadcodec.IsEncrypted(p) {
				assert.True(t, inSA, "plaintext payload outside search attributes")
				return
			}
			id := string(p.Metadata[payloadcodec.MetadataKeyID])
			ids[id]++
			if id == "old" && oldPayload == nil {
				oldPayload = p
			}
			_, err := after.Decode([]*commonpb.Payload{p})
			assert.NoError(t, err, "every payload decodes with the rotated key set")
		})
	}
	assert.Positive(t, ids["old"], "payloads from before the rotation")
	assert.Positive(t, ids["new"], "payloads from after it")
	assert.Len(t, ids, 2)
	require.NotNil(t, oldPayload)
	_, err = newOnly.Decode([]*commonpb.Payload{oldPayload})
	require.ErrorIs(t, err, payloadcodec.ErrUnknownKey, "dropping the old key too early makes old payloads unreadable")
	assert.Contains(t, err.Error(), `"old"`)
}

// BenchmarkReadFileEncryption measures one read_file update of a 64 KiB file
// with payload encryption against the same without it, in the same run:
// the codec's cost on the hot path (docs/BENCHMARKS.md).
func BenchmarkReadFileEncryption(b *testing.B) {
	keyFile := filepath.Join(b.TempDir(), "bench.key")
	key := make([]byte, payloadcodec.KeySize)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		b.Fatal(err)
	}
	codec, err := payloadcodec.FromEnv(envOf(map[string]string{payloadcodec.EnvKeys: "bench=" + keyFile}))
	if err != nil {
		b.Fatal(err)
	}
	content := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	for _, encrypted := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "encrypted"}[encrypted]
		b.Run(name, func(b *testing.B) {
			// Both variants dial a client of their own (only the converters differ).
			copts, sopts := client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(quiet)}, sandboxclient.Options{}
			if encrypted {
				copts.DataConverter, copts.FailureConverter = codec.DataConverter(), codec.FailureConverter()
				sopts.DataConverter = codec.DataConverter()
			}
			c, err := client.Dial(copts)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := baseConfig(b, uniq(b, "bench-enc-"+name))
			h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: c, Credentials: creds, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Stop()
			sopts.TaskQueue = cfg.TaskQueue
			sc := sandboxclient.New(c, sopts)
			ctx := context.Background()
			s, _, err := sc.Acquire(ctx, editRequest(uniq(b, "u"), "p", "enc", benchRepo(b)))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.WriteFile(ctx, "bench.bin", content, 0); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(content)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := s.ReadFile(ctx, "bench.bin")
				if err != nil || len(got) != len(content) {
					b.Fatal(err, len(got))
				}
			}
		})
	}
}

// TestWorkerRefusesPlaintextPayloads: a worker with SANDBOX_PAYLOAD_KEYS and
// SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION=1 (its codec refuses payloads without
// encryption metadata: payloadcodec.ErrPlaintext) serves a client with the
// keys end to end — acquire, write, exec, read, describe, list, and the
// SDK's own __stack_trace and __temporal_workflow_metadata queries, which
// carry no arguments — while a client without the keys is refused: its
// updates fail as InvalidArgument and change nothing (the file is not
// written, the command does not run), and its acquire of a new workspace
// fails without the session scheduling a single activity (its run fails
// as InvalidArgument). The refusals' messages are encrypted by the worker:
// such a client reads only their type.
func TestWorkerRefusesPlaintextPayloads(t *testing.T) {
	keys := "k1=" + newKeyFile(t, "k1")
	env := map[string]string{
		"TEMPORAL_ADDRESS": temporalAddr, "TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "no-temporal.toml"),
		payloadcodec.EnvKeys: keys, hostworker.EnvRequirePayloadEncryption: "1",
	}
	sec, err := hostworker.ConfigFromEnv(envOf(with(env, "SANDBOX_DATA_DIR", filepath.Join(t.TempDir(), "data"))))
	require.NoError(t, err)
	require.True(t, sec.Security.RequirePayloadEncryption)
	cfg := baseConfig(t, "strict")
	cfg.Security.Payloads, cfg.Security.RequirePayloadEncryption = sec.Security.Payloads, true
	// No client passed: the worker dials with its own converters (WorkerCodec).
	h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Credentials: creds, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	t.Cleanup(func() { destroyRuntimes(h) })
	ctx := ctxFor(t, 3*time.Minute)

	keyed, err := sandboxclient.Dial(ctx, sandboxclient.DialOptions{TaskQueue: cfg.TaskQueue, LookupEnv: envOf(env), Logger: quiet})
	require.NoError(t, err)
	defer keyed.Close()
	keyless, err := sandboxclient.Dial(ctx, sandboxclient.DialOptions{TaskQueue: cfg.TaskQueue, LookupEnv: envOf(with(env, payloadcodec.EnvKeys, "")), Logger: quiet})
	require.NoError(t, err)
	defer keyless.Close()

	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	url := gittest.FileURL(upstream)
	user := uniq(t, "u")
	s, hd, err := keyed.Acquire(ctx, editRequest(user, "p", "c1", url))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "notes.txt", []byte("encrypted both ways\n"), 0))
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "cat notes.txt; echo ran"}})
	require.NoError(t, err)
	assert.Equal(t, "encrypted both ways\nran\n", string(res.Stdout))
	got, err := s.ReadFile(ctx, "notes.txt")
	require.NoError(t, err)
	assert.Equal(t, "encrypted both ways\n", string(got))
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, hd.WorkspaceID, d.WorkspaceID)
	listedSoon(t, keyed, "SandboxUser = '"+user+"'", hd.WorkspaceID)
	// The SDK's own queries carry no argument: answered (their results
	// are encrypted; the keyless client only checks the worker answers).
	for _, q := range []string{"__stack_trace", "__temporal_workflow_metadata"} {
		_, err := keyless.Temporal().QueryWorkflow(ctx, s.WorkflowID(), "", q)
		require.NoError(t, err, q)
	}

	// A client without the keys: its plaintext arguments are refused.
	ps, err := keyless.Session(hd.WorkspaceID)
	require.NoError(t, err)
	err = ps.WriteFile(ctx, "planted.txt", []byte("plaintext"), 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = ps.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "touch ran-from-plaintext"}})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = ps.ReadFile(ctx, "notes.txt")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	// Nothing of it happened.
	_, err = s.ReadFile(ctx, "planted.txt")
	require.ErrorIs(t, err, sandboxapi.ErrFileNotFound)
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "test -e ran-from-plaintext && echo RAN || echo absent"}})
	require.NoError(t, err)
	assert.Equal(t, "absent\n", string(res.Stdout))

	// Its acquire of a new workspace: refused, and the session run it
	// started (with a plaintext input) schedules nothing.
	other := editRequest(uniq(t, "u"), "p", "c2", url)
	_, _, err = keyless.Acquire(ctx, other)
	require.Error(t, err)
	wfID, err := sandboxapi.SessionWorkflowID(sandboxapi.WorkspaceIDForKey(other.Key()))
	require.NoError(t, err)
	events, _ := rawHistory(t, tc, wfID)
	failed := ""
	for _, ev := range events {
		he := ev.(*historypb.HistoryEvent)
		assert.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, he.GetEventType(), "an activity ran for a plaintext acquire")
		assert.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, he.GetEventType(), "a plaintext update was accepted")
		if f := he.GetWorkflowExecutionFailedEventAttributes(); f != nil {
			failed = f.GetFailure().GetApplicationFailureInfo().GetType()
		}
	}
	assert.Equal(t, "InvalidArgument", failed, "the run started with a plaintext input fails typed (payloadcodec.ErrPlaintext)")

	// Updates without any argument never meet the codec: the strict
	// worker refuses them (hostworker's argumentsRequired) — status,
	// diff and hibernate with no payload at all — while the keyed
	// client's (an encrypted {}) are served.
	for _, op := range []string{sandboxapi.UpdateStatus, sandboxapi.UpdateDiff, sandboxapi.UpdateHibernate} {
		h, err := keyless.Temporal().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: s.WorkflowID(), UpdateName: op,
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%s without an argument: %v", op, err)
		assert.Equal(t, "InvalidArgument", app.Type(), op)
	}
	_, err = ps.Status(ctx)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a keyless client's {} is plaintext: refused by the codec")
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, st.Branch)
	d, err = s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateActive, d.State, "the argument-less hibernate did not run")

	// Signals without any argument never meet the codec either: the
	// session drops them (workflows.RequireSignalPayloads), so a keyless
	// unpin leaves the keyed pin and a keyless evict evicts nothing.
	pinned, err := s.Pin(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NotNil(t, pinned.PinnedUntil)
	for _, sig := range []string{sandboxapi.SignalUnpin, sandboxapi.SignalEvict, sandboxapi.SignalPin} {
		// The SDK's SignalWorkflow sends one (null) payload; the service
		// takes a signal with none.
		_, err := keyless.Temporal().WorkflowService().SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
			Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: s.WorkflowID()}, SignalName: sig,
			Identity: "keyless", RequestId: uniq(t, sig)})
		require.NoError(t, err, sig)
	}
	_, err = s.Status(ctx) // through the session after the signals
	require.NoError(t, err)
	ev, err := s.EvictionState(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev.PinnedUntil, "an argument-less unpin was taken")
	assert.WithinDuration(t, *pinned.PinnedUntil, *ev.PinnedUntil, time.Second)
	assert.Equal(t, pinned.LastPinRequest, ev.LastPinRequest, "an argument-less pin or unpin was handled")
	d, err = s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateActive, d.State, "the argument-less evict ran")
	events, _ = rawHistory(t, tc, s.WorkflowID())
	refusals := 0
	for _, ev := range events {
		if m := ev.(*historypb.HistoryEvent).GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "SideEffect" {
			refusals++
		}
	}
	assert.Equal(t, 3, refusals, "each refusal is recorded, so the run replays the same")
	// A worker without the setting replays the run as it was recorded
	// (the signals refused), not as it would decide now.
	replayer, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: sec.Security.Payloads.DataConverter()})
	require.NoError(t, err)
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	require.NoError(t, replayer.ReplayWorkflowHistory(nil, history(t, s.WorkflowID(), "")))

	// The worker's session still works for the keyed client.
	got, err = s.ReadFile(ctx, "notes.txt")
	require.NoError(t, err)
	assert.Equal(t, "encrypted both ways\n", string(got))
}
