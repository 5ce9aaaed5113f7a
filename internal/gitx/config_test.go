package gitx

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestParseConfigList(t *testing.T) {
	out := "local\x00core.bare\ntrue\x00local\x00filter.x y.required\x00worktree\x00diff.a.b.textconv\nt\nwith newline?\x00command\x00core.hookspath\n/dev/null\x00"
	got := parseConfigList([]byte(out))
	require.Len(t, got, 4)
	assert.Equal(t, scopedEntry{"local", ConfigEntry{"core.bare", "true"}}, got[0])
	assert.Equal(t, scopedEntry{"local", ConfigEntry{"filter.x y.required", ""}}, got[1])
	assert.Equal(t, scopedEntry{"worktree", ConfigEntry{"diff.a.b.textconv", "t\nwith newline?"}}, got[2])
	assert.Equal(t, "command", got[3].Scope)
	assert.Empty(t, parseConfigList(nil))
}

func TestSplitKey(t *testing.T) {
	for key, want := range map[string][3]string{
		"core.fsmonitor":                   {"core", "", "fsmonitor"},
		"Filter.We.Ird.Clean":              {"filter", "We.Ird", "clean"},
		"url.https://x.example/.insteadof": {"url", "https://x.example/", "insteadof"},
		"http.https://h/o/r.git.proxy":     {"http", "https://h/o/r.git", "proxy"},
	} {
		s, sub, n, ok := splitKey(key)
		require.True(t, ok, key)
		assert.Equal(t, want, [3]string{s, sub, n}, key)
	}
	for _, bad := range []string{"", "nodot", ".x", "x."} {
		_, _, _, ok := splitKey(bad)
		assert.False(t, ok, bad)
	}
}

// TestAnalyzeKinds maps each kind of dangerous key onto its action and
// override; command-scope entries (the runner's own) are ignored.
func TestAnalyzeKinds(t *testing.T) {
	entries := []scopedEntry{
		{"command", ConfigEntry{"core.fsmonitor", "false"}},
		{"local", ConfigEntry{"core.bare", "true"}},
		{"local", ConfigEntry{"remote.origin.url", "https://h/o/r.git"}},
		{"local", ConfigEntry{"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"}},
		{"local", ConfigEntry{"user.name", "agent"}},
		{"local", ConfigEntry{"core.fsmonitor", "/x"}},
		{"local", ConfigEntry{"core.hookspath", "/x"}},
		{"local", ConfigEntry{"filter.lfs.smudge", "git-lfs smudge %f"}},
		{"local", ConfigEntry{"filter.lfs.required", "true"}},
		{"worktree", ConfigEntry{"filter.a=b.process", "/x"}},
		{"local", ConfigEntry{"diff.d.textconv", "/x"}},
		{"local", ConfigEntry{"diff.d.command", "/x"}},
		{"local", ConfigEntry{"diff.d.xfuncname", "^x"}},
		{"local", ConfigEntry{"merge.m.driver", "/x %A"}},
		{"local", ConfigEntry{"http.https://h/.proxy", "http://evil"}},
		{"local", ConfigEntry{"http.https://h/.sslcainfo", "/evil.pem"}},
		{"local", ConfigEntry{"http.sslverify", "false"}},
		{"local", ConfigEntry{"credential.https://h.helper", "!evil"}},
		{"local", ConfigEntry{"url.https://evil/.insteadof", "https://h/"}},
		{"local", ConfigEntry{"remote.https://h/o/r.git.url", "https://evil/x"}},
		{"local", ConfigEntry{"remote.origin.uploadpack", "/x"}},
		{"local", ConfigEntry{"remote.origin.proxy", "http://evil"}},
		{"local", ConfigEntry{"protocol.evil.allow", "always"}},
		{"local", ConfigEntry{"protocol.ext.allow", "always"}},
		{"local", ConfigEntry{"include.path", "/x"}},
		{"local", ConfigEntry{"includeif.gitdir:/.path", "/x"}},
		{"local", ConfigEntry{"extensions.worktreeconfig", "true"}},
		{"local", ConfigEntry{"core.worktree", "/elsewhere"}},
		{"local", ConfigEntry{"uploadpack.packobjectshook", "/x"}},
		{"local", ConfigEntry{"pager.log", "/x"}},
		{"local", ConfigEntry{"submodule.s.update", "!/x"}},
		{"local", ConfigEntry{"submodule.s.update", "rebase"}},
	}
	in := analyze(entries)
	actions := map[string]string{}
	for _, p := range in.Poisoned {
		actions[p.Scope+" "+p.Key] = p.Action
		for _, e := range entries {
			if len(e.Value) > 3 && !strings.Contains(p.Key, e.Value) {
				assert.NotContains(t, p.String(), e.Value, "a poison never reports a value")
			}
		}
	}
	want := map[string]string{
		"local core.fsmonitor":               ActionNeutralized,
		"local core.hookspath":               ActionNeutralized,
		"local filter.lfs.smudge":            ActionNeutralized,
		"worktree filter.a=b.process":        ActionNeutralized,
		"local diff.d.textconv":              ActionNeutralized,
		"local diff.d.command":               ActionNeutralized,
		"local merge.m.driver":               ActionNeutralized,
		"local http.https://h/.proxy":        ActionNeutralized,
		"local http.https://h/.sslcainfo":    ActionReported,
		"local http.sslverify":               ActionNeutralized,
		"local credential.https://h.helper":  ActionNeutralized,
		"local url.https://evil/.insteadof":  ActionRefused,
		"local remote.https://h/o/r.git.url": ActionRefused,
		"local remote.origin.uploadpack":     ActionRefused,
		"local remote.origin.proxy":          ActionNeutralized,
		"local protocol.evil.allow":          ActionNeutralized,
		"local protocol.ext.allow":           ActionNeutralized,
		"local include.path":                 ActionReported,
		"local includeif.gitdir:/.path":      ActionReported,
		"local extensions.worktreeconfig":    ActionReported,
		"local core.worktree":                ActionReported,
		"local uploadpack.packobjectshook":   ActionNeutralized,
		"local pager.log":                    ActionNeutralized,
		"local submodule.s.update":           ActionReported,
	}
	assert.Equal(t, want, actions)
	assert.Len(t, in.Redirects(), 3)

	ov := map[string]string{}
	for _, e := range in.Overrides() {
		_, dup := ov[e.Key]
		assert.False(t, dup, "override %s added twice", e.Key)
		ov[e.Key] = e.Value
	}
	assert.Equal(t, map[string]string{
		"filter.lfs.clean": "", "filter.lfs.smudge": "", "filter.lfs.process": "", "filter.lfs.required": "false",
		"filter.a=b.clean": "", "filter.a=b.smudge": "", "filter.a=b.process": "", "filter.a=b.required": "false",
		"diff.d.textconv": "cat", "diff.d.cachetextconv": "false", "diff.d.command": "false",
		"merge.m.driver":        "false",
		"http.https://h/.proxy": "",
		"remote.origin.proxy":   "",
		"protocol.evil.allow":   "never",
	}, ov)

	clean := analyze([]scopedEntry{{"local", ConfigEntry{"core.bare", "true"}}, {"local", ConfigEntry{"user.email", "a@b"}}})
	assert.Empty(t, clean.Poisoned)
	assert.Empty(t, clean.Overrides())
	assert.Nil(t, (*Inspection)(nil).Redirects())
}

func TestPoisonStringQuotesTheKey(t *testing.T) {
	p := Poison{Key: "filter.a\x1b[31mred.clean", Scope: "local", Action: ActionNeutralized, Why: "runs"}
	s := p.String()
	assert.NotContains(t, s, "\x1b")
	assert.True(t, strings.HasPrefix(s, `"filter.a\x1b[31mred.clean" (local)`), s)
	long := Poison{Key: strings.Repeat("k", 1000)}
	assert.Less(t, len(long.String()), 300)
}

// TestPoisonReasonsQuoteTheSubsection: the parts of a key an agent chooses
// (a URL, a transport) appear quoted in the reason too, never raw.
func TestPoisonReasonsQuoteTheSubsection(t *testing.T) {
	in := analyze([]scopedEntry{
		{"local", ConfigEntry{"http.https://h\x1b[2K\rFAKE.proxy", "http://p"}},
		{"local", ConfigEntry{"url.file:///tmp/e\x1b[31mvil.insteadof", "https://x"}},
		{"local", ConfigEntry{"protocol.ev\x1b[5mil.allow", "always"}},
		{"local", ConfigEntry{"http.https://h\n.cookiefile", "/tmp/c"}},
	})
	require.NotEmpty(t, in.Poisoned)
	for _, p := range in.Poisoned {
		s := p.String()
		assert.NotContains(t, s, "\x1b", s)
		assert.NotContains(t, s, "\r", s)
		assert.NotContains(t, s, "\n", s)
	}
}

func TestSubcommand(t *testing.T) {
	assert.Equal(t, "push", subcommand([]string{"-c", "core.abbrev=no", "push", "--porcelain"}))
	assert.Equal(t, "fetch", subcommand([]string{"--no-pager", "-C", "/x", "fetch"}))
	assert.Equal(t, "", subcommand(nil))
}

// TestBufferStdin: stdin up to maxRetryStdin is kept whole for a retry;
// longer stdin is replayed once, in full, through rest.
func TestBufferStdin(t *testing.T) {
	stdin, rest, err := bufferStdin(nil)
	require.NoError(t, err)
	assert.Nil(t, stdin)
	assert.Nil(t, rest)
	stdin, rest, err = bufferStdin(strings.NewReader("abc"))
	require.NoError(t, err)
	assert.Equal(t, "abc", string(stdin))
	assert.Nil(t, rest)
	long := strings.Repeat("x", maxRetryStdin+10)
	_, rest, err = bufferStdin(strings.NewReader(long))
	require.NoError(t, err)
	require.NotNil(t, rest)
	all, err := io.ReadAll(rest)
	require.NoError(t, err)
	assert.Equal(t, len(long), len(all))
	assert.Equal(t, long, string(all))
}

// TestCheckPushSpecAndPushArgs: a push is refused before any git runs for a
// relative repository path, no URL, a bad branch or record ref, or a lease
// that is not a commit id; a lease becomes --force-with-lease on the ref.
func TestCheckPushSpecAndPushArgs(t *testing.T) {
	good := sandbox.PushSpec{GitDir: "/r/.bare", Repo: sandboxapi.RepoIdentity{URL: "https://h/o/r.git"}, Branch: "b", RecordRef: "refs/sandbox/pushed/b"}
	require.NoError(t, checkPushSpec(good))
	for _, mutate := range []func(*sandbox.PushSpec){
		func(s *sandbox.PushSpec) { s.GitDir = "r/.bare" },
		func(s *sandbox.PushSpec) { s.Repo.URL = "" },
		func(s *sandbox.PushSpec) { s.Branch = "-x" },
		func(s *sandbox.PushSpec) { s.RecordRef = "pushed/b" },
	} {
		spec := good
		mutate(&spec)
		assert.True(t, errors.Is(checkPushSpec(spec), sandboxapi.ErrInvalidArgument), "%+v", spec)
	}
	args, err := pushArgs("refs/heads/b", nil)
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(args, " "), "--force-with-lease")
	lease := strings.Repeat("a", 40)
	args, err = pushArgs("refs/heads/b", &lease)
	require.NoError(t, err)
	assert.Equal(t, "--force-with-lease=refs/heads/b:"+lease, args[len(args)-1])
	empty := ""
	args, err = pushArgs("refs/heads/b", &empty)
	require.NoError(t, err)
	assert.Equal(t, "--force-with-lease=refs/heads/b:", args[len(args)-1])
	bad := "main"
	_, err = pushArgs("refs/heads/b", &bad)
	assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument))
}
