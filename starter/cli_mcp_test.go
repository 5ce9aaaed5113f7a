package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

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
