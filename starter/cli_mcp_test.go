package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/mcpauth"
	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// mcpFlags is a flag set with the request flags, parsed from args.
func mcpFlags(t *testing.T, req *sandboxapi.WorkspaceRequest, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("mcp", pflag.ContinueOnError)
	var mode string
	workspaceRequestFlags(fs, req, &mode, "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestMCPBinding(t *testing.T) {
	var req sandboxapi.WorkspaceRequest
	fs := mcpFlags(t, &req, "--repo", "https://github.com/acme/app.git", "--user", "alice", "--project", "app", "--conversation", "c1")
	b, err := mcpBinding(fs, "", &req, "edit")
	if err != nil || b.Request != &req || b.WorkspaceID != "" || req.Mode != sandboxapi.ModeEdit {
		t.Errorf("request binding: %+v, %v", b, err)
	}

	var none sandboxapi.WorkspaceRequest
	b, err = mcpBinding(mcpFlags(t, &none), testWorkspaceID, &none, "edit")
	if err != nil || b.Request != nil || b.WorkspaceID != testWorkspaceID {
		t.Errorf("workspace binding: %+v, %v", b, err)
	}

	for _, f := range requestFlags {
		var r sandboxapi.WorkspaceRequest
		_, err := mcpBinding(mcpFlags(t, &r, "--"+f, "x"), testWorkspaceID, &r, "edit")
		if !sandboxapi.IsInvalidArgument(err) || !strings.Contains(err.Error(), "--workspace and --"+f+":") {
			t.Errorf("--workspace with --%s: %v", f, err)
		}
	}
	for name, args := range map[string][]string{"nothing": nil, "no project": {"--repo", "https://github.com/a/b.git", "--user", "u"}} {
		var r sandboxapi.WorkspaceRequest
		if _, err := mcpBinding(mcpFlags(t, &r, args...), "", &r, "edit"); !sandboxapi.IsInvalidArgument(err) {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := mcpBinding(mcpFlags(t, &none), "ws-nope", &none, "edit"); !sandboxapi.IsInvalidArgument(err) {
		t.Errorf("malformed workspace id: %v", err)
	}
}

func TestHTTPToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte("0123456789abcdef-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr, file, want string
		ok               bool
	}{
		{"", "", "", true},               // stdio
		{"127.0.0.1:8765", "", "", true}, // loopback, no token
		{"localhost:8765", "", "", true}, // loopback by name
		{"[::1]:8765", "", "", true},     // IPv6 loopback
		{"0.0.0.0:8765", good, "0123456789abcdef-token", true},
		{"0.0.0.0:8765", "", "", false},      // off loopback without a token
		{"", good, "", false},                // --token-file without --http
		{"127.0.0.1:8765", short, "", false}, // too short
		{"127.0.0.1:8765", filepath.Join(dir, "none"), "", false},
		{"nonsense", "", "", false}, // not host:port
	} {
		got, err := httpToken(tc.addr, tc.file)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("%q %q: %q, %v; want %q", tc.addr, tc.file, got, err, tc.want)
		}
		if !tc.ok && !sandboxapi.IsInvalidArgument(err) {
			t.Errorf("%q %q: %q, %v; want InvalidArgument", tc.addr, tc.file, got, err)
		}
	}
}

// TestRequestFlagsAreTheDeclaredOnes: the names mcp refuses beside
// --workspace are exactly the flags workspaceRequestFlags declares.
func TestRequestFlagsAreTheDeclaredOnes(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var req sandboxapi.WorkspaceRequest
	var mode string
	workspaceRequestFlags(fs, &req, &mode, "", "")
	var declared []string
	fs.VisitAll(func(f *pflag.Flag) { declared = append(declared, f.Name) })
	want := append([]string(nil), requestFlags...)
	sort.Strings(want)
	if !reflect.DeepEqual(declared, want) {
		t.Errorf("declared %v, requestFlags %v", declared, want)
	}
}

func TestMultiFlags(t *testing.T) {
	t.Setenv(mcpKeyFileEnv, "")
	ok := func(args ...string) []string {
		return append([]string{"--http", "127.0.0.1:0", "--multi", "--key-file", "k"}, args...)
	}
	for _, tc := range []struct {
		args []string
		want string // "" = accepted
	}{
		{ok(), ""},
		{ok("--session-timeout", "5m"), ""},
		{[]string{"--multi", "--key-file", "k"}, "give --http ADDR"},
		{[]string{"--multi", "--http", "127.0.0.1:0"}, "needs --key-file"},
		{[]string{"--http", "127.0.0.1:0", "--key-file", "k"}, "--key-file is for --multi"},
		{[]string{"--http", "127.0.0.1:0", "--session-timeout", "5m"}, "--session-timeout and --max-sessions are for --multi"},
		{[]string{"--http", "127.0.0.1:0", "--max-sessions", "3"}, "--session-timeout and --max-sessions are for --multi"},
		{ok("--token-file", "t"), "not --token-file"},
		{ok("--workspace", testWorkspaceID), "no --workspace"},
		{ok("--repo", "https://github.com/a/b.git"), "no --repo"},
		{ok("--conversation", "c"), "no --conversation"},
		{ok("--session-timeout", "0"), "want 1s to 24h"},
		{ok("--session-timeout", "25h"), "want 1s to 24h"},
	} {
		c := &cli{}
		cmd := c.mcpCommand()
		require.NoError(t, cmd.Flags().Parse(tc.args), "%v", tc.args)
		f := cmd.Flags()
		multi, _ := f.GetBool("multi")
		ws, _ := f.GetString("workspace")
		addr, _ := f.GetString("http")
		key, _ := f.GetString("key-file")
		st, _ := time.ParseDuration(f.Lookup("session-timeout").Value.String())
		err := multiFlags(f, multi, ws, addr, key, st)
		if tc.want == "" {
			assert.NoError(t, err, "%v", tc.args)
			continue
		}
		if assert.True(t, sandboxapi.IsInvalidArgument(err), "%v: %v", tc.args, err) {
			assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
		}
	}
	// Through Main: refused before anything is dialled or listened on, exit 2.
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("c2hvcnQ=\n"), 0o600))
	for _, args := range [][]string{
		{"mcp", "--multi", "--key-file", short},
		{"mcp", "--multi", "--http", "127.0.0.1:0"},
		{"mcp", "--multi", "--http", "127.0.0.1:0", "--key-file", short},
		{"mcp", "--multi", "--http", "127.0.0.1:0", "--key-file", filepath.Join(dir, "none")},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(args, strings.NewReader(""), &stdout, &stderr)
		assert.Equal(t, 2, code, "%v: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), "InvalidArgument", "%v", args)
	}
}

// TestMCPTokenCommand: `sandboxctl mcp token WS --ttl D --key-file FILE`
// prints a token the key verifies for WS as stdout's last line, expiring
// after D; bad lifetimes, ids and key files exit 2.
func TestMCPTokenCommand(t *testing.T) {
	t.Setenv(mcpKeyFileEnv, "")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "mcp.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("c2FuZGJveGNvcmUtbWNwLXRlc3Qta2V5LW5vdC1hLXNlY3JldC0wMDAx\n"), 0o600))
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("c2hvcnQ=\n"), 0o600))
	key, err := mcpauth.LoadKey(keyFile)
	require.NoError(t, err)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"mcp", "token"}, args...), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	before := time.Now()
	code, out, errOut := run(testWorkspaceID, "--ttl", "2h", "--key-file", keyFile)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	c, err := key.Verify(lines[len(lines)-1], time.Now())
	require.NoError(t, err)
	assert.Equal(t, testWorkspaceID, c.WorkspaceID)
	assert.WithinDuration(t, before.Add(2*time.Hour), c.Expiry, 2*time.Second)
	assert.Contains(t, errOut, "expires "+c.Expiry.UTC().Format(time.RFC3339))

	code, out, errOut = run(testWorkspaceID, "--key-file", keyFile)
	require.Equal(t, 0, code, errOut)
	c, err = key.Verify(strings.TrimSpace(out), time.Now())
	require.NoError(t, err)
	assert.WithinDuration(t, before.Add(mcpauth.DefaultTTL), c.Expiry, 2*time.Second, "default ttl")

	t.Setenv(mcpKeyFileEnv, keyFile)
	code, out, errOut = run(testWorkspaceID, "--ttl", "90", "--json")
	require.Equal(t, 0, code, errOut)
	var js struct {
		Token       string `json:"token"`
		WorkspaceID string `json:"workspace_id"`
		ExpiresAt   string `json:"expires_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	c, err = key.Verify(js.Token, time.Now())
	require.NoError(t, err, out)
	assert.Equal(t, testWorkspaceID, js.WorkspaceID)
	assert.Equal(t, c.Expiry.UTC().Format(time.RFC3339), js.ExpiresAt)
	t.Setenv(mcpKeyFileEnv, "")

	for _, args := range [][]string{
		{testWorkspaceID, "--ttl", "0", "--key-file", keyFile},
		{testWorkspaceID, "--ttl", "721h", "--key-file", keyFile},
		{testWorkspaceID, "--ttl", "500ms", "--key-file", keyFile},
		{"ws-nope", "--key-file", keyFile},
		{testWorkspaceID, "--key-file", short},
		{testWorkspaceID, "--key-file", filepath.Join(dir, "none")},
		{testWorkspaceID},
		{},
	} {
		code, out, errOut := run(args...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
		assert.Empty(t, out, "%v", args)
	}
}

// `sandboxctl mcp --help` names every tool of the surface, as the catalog
// (tools.Names) lists them, and which ones a read-only workspace gets.
func TestMCPHelpListsEveryTool(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, Main([]string{"mcp", "--help"}, strings.NewReader(""), &stdout, &stderr), stderr.String())
	help := stdout.String()
	all := tools.Names(tools.AllCaps)
	require.GreaterOrEqual(t, len(all), 8)
	for _, name := range all {
		assert.Contains(t, help, name)
	}
	assert.Contains(t, help, "read tools only ("+strings.Join(tools.Names(tools.Caps{Known: true}), ", ")+")")
}
