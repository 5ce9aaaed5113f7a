package tools

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func names(set []Tool) []string {
	var out []string
	for _, t := range set {
		out = append(out, t.Def.Name)
	}
	return out
}

func TestToolSetIsGatedByCapabilities(t *testing.T) {
	assert.Equal(t, []string{TextEditor, Search, Git}, names(Tools(Caps{Known: true})))
	assert.Equal(t, []string{TextEditor, Search, Git}, names(Tools(Caps{})), "unknown: read tools only")
	assert.Equal(t, []string{TextEditor, Shell, Output, ExecToolName, WriteStdinToolName, Overlaps, SetupTool, Search, Git}, names(Tools(Caps{Known: true, Writable: true})))
	assert.Equal(t, []string{TextEditor, Shell, Output, ExecToolName, WriteStdinToolName, Overlaps, SetupTool, Search, Git, PR}, names(Tools(Caps{Known: true, Writable: true, CodeHost: true})))
	assert.Equal(t, []string{TextEditor, Search, Git}, names(Tools(Caps{Known: true, CodeHost: true})), "no PR on a read-only workspace")

	for _, caps := range []Caps{{}, {Known: true, Writable: true, CodeHost: true}} {
		for _, tool := range Tools(caps) {
			d := tool.Def
			require.NotNil(t, d.Annotations, d.Name)
			assert.NotEmpty(t, d.Description, d.Name)
			in, err := json.Marshal(d.InputSchema)
			require.NoError(t, err)
			out, err := json.Marshal(d.OutputSchema)
			require.NoError(t, err)
			assert.Contains(t, string(in), `"type":"object"`, d.Name)
			assert.Contains(t, string(in), `"additionalProperties":false`, d.Name)
			assert.NotContains(t, string(in), `$schema`, d.Name)
			assert.True(t, strings.HasPrefix(string(out), `{"type":"object","anyOf":[`), "%s: %s", d.Name, out)
			if !caps.Writable {
				assert.True(t, d.Annotations.ReadOnlyHint, d.Name)
			}
		}
	}
	// Read-only editor and git offer the read commands only.
	ro := Tools(Caps{Known: true})
	in, _ := json.Marshal(ro[0].Def.InputSchema)
	assert.Contains(t, string(in), `"enum":["view"]`)
	in, _ = json.Marshal(ro[2].Def.InputSchema)
	assert.Contains(t, string(in), `"enum":["status","diff","log"]`)
	// sandbox_shell names the networks a command may ask for.
	found := false
	for _, tl := range Tools(Caps{Known: true, Writable: true}) {
		if tl.Def.Name == Shell {
			found = true
			in, _ = json.Marshal(tl.Def.InputSchema)
			assert.Contains(t, string(in), `"enum":["none","limited","default"]`)
		}
	}
	assert.True(t, found, "sandbox_shell is offered")
	rw := Tools(Caps{Known: true, Writable: true})
	git := slices.IndexFunc(rw, func(tl Tool) bool { return tl.Def.Name == Git })
	require.GreaterOrEqual(t, git, 0)
	in, _ = json.Marshal(rw[git].Def.InputSchema)
	assert.Contains(t, string(in), `"enum":["status","diff","log","commit","push","checkpoint","checkpoints","rollback"]`)
}

func TestSmartCase(t *testing.T) {
	for pattern, want := range map[string]bool{
		"foo": true, "Foo": false, `\Sfoo\W`: true, `\w+\d`: true, `\p{Lu}x`: true, `\x{41}a`: true, `[A-Z]x`: false, `\bhello`: true, "naïve": true, "NAÏVE": false,
	} {
		got, err := ignoreCase("", pattern, false)
		require.NoError(t, err, pattern)
		assert.Equal(t, want, got, pattern)
	}
	got, err := ignoreCase("smart", `\S`, true)
	require.NoError(t, err)
	assert.False(t, got, `a literal \S has an upper-case S`)
	got, _ = ignoreCase("sensitive", "foo", false)
	assert.False(t, got)
	got, _ = ignoreCase("insensitive", "Foo", false)
	assert.True(t, got)
	_, err = ignoreCase("loud", "x", false)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = ignoreCase("", "(", false)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

func TestViewFileRanges(t *testing.T) {
	data := []byte("a\nb\nc\nd\n")
	out, _, err := viewFile("f", data, []int{2, 3})
	require.NoError(t, err)
	assert.Equal(t, "     2\tb\n     3\tc\n", out.Text)
	assert.Equal(t, 4, out.Lines)
	out, _, err = viewFile("f", data, []int{3, -1})
	require.NoError(t, err)
	assert.Equal(t, "     3\tc\n     4\td\n", out.Text)
	for _, r := range [][]int{{0, 2}, {3, 2}, {5, 5}, {1}, {2, 9}} {
		_, _, err := viewFile("f", data, r)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "%v", r)
	}
	out, text, err := viewFile("bin", []byte{0, 1, 2}, nil)
	require.NoError(t, err)
	assert.Contains(t, text, "binary")
	assert.Equal(t, 0, out.Lines)
}

func TestCutToRuneAndDiffFilter(t *testing.T) {
	s := []byte("añb€")
	for i := 0; i <= len(s); i++ {
		c := cutToRune(s[:i])
		assert.True(t, strings.HasPrefix(string(s), string(c)))
		assert.True(t, len(c) >= i-3)
		assert.Equal(t, string(c), strings.ToValidUTF8(string(c), "?"), "never a split rune: %q", c)
	}
	d := sandboxapi.Diff{Files: []string{"a.txt", "dir/b.txt", "dirx/c.txt"}, Patch: "diff --git a/a.txt b/a.txt\n+a\n" +
		"diff --git a/dir/b.txt b/dir/b.txt\n+b\ndiff --git a/dirx/c.txt b/dirx/c.txt\n+c\n"}
	f, err := filterDiff(d, []string{"dir"})
	require.NoError(t, err)
	assert.Equal(t, []string{"dir/b.txt"}, f.Files)
	assert.Equal(t, "diff --git a/dir/b.txt b/dir/b.txt\n+b\n", f.Patch)
	_, err = filterDiff(d, []string{"../x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

func TestInstructionsFollowTheToolSet(t *testing.T) {
	mentioned := regexp.MustCompile(`sandbox_[a-z_]+`)
	for _, caps := range []Caps{{}, {Known: true}, {Known: true, CodeHost: true}, {Known: true, Writable: true}, {Known: true, Writable: true, CodeHost: true}} {
		text := Instructions(caps)
		offered := names(Tools(caps))
		for _, name := range mentioned.FindAllString(text, -1) {
			assert.Contains(t, offered, name, "%+v: the instructions name %s, which is not offered: %s", caps, name, text)
		}
		verbs := strings.ReplaceAll(text, "base commit", "") // a noun, not the git command
		for _, word := range []string{"commit", "push"} {
			if caps.Writable {
				assert.Contains(t, verbs, word, "%+v", caps)
			} else {
				assert.NotContains(t, verbs, word, "%+v: %s", caps, text)
			}
		}
		assert.Equal(t, caps.Writable, strings.Contains(text, Shell), "%+v: %s", caps, text)
	}
}

func TestToolTitles(t *testing.T) {
	want := map[string]string{TextEditor: "Text editor", Shell: "Shell", Output: "Command output", Search: "Search", Git: "Git", PR: "Pull request"}
	for _, caps := range []Caps{{}, {Known: true, Writable: true, CodeHost: true}} {
		for _, tool := range Tools(caps) {
			if w, ok := want[tool.Def.Name]; ok {
				assert.Equal(t, w, tool.Def.Annotations.Title, "%+v: %s", caps, tool.Def.Name)
			}
			assert.NotEqual(t, tool.Def.Name, tool.Def.Annotations.Title, "%+v: a title, not the tool's name", caps)
		}
	}
}

// TestCollectLimits: yield_time_ms (its default when 0) and
// max_output_bytes are checked together, the yield first.
func TestCollectLimits(t *testing.T) {
	wait, limit, err := collectLimits(0, DefaultExecYieldMS, 0)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(DefaultExecYieldMS)*time.Millisecond, wait)
	assert.Equal(t, DefaultInteractiveOut, limit)
	wait, limit, err = collectLimits(MinYieldTimeMS, DefaultWriteYieldMS, 100)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(MinYieldTimeMS)*time.Millisecond, wait)
	assert.Equal(t, 100, limit)
	_, _, err = collectLimits(MaxYieldTimeMS+1, DefaultExecYieldMS, -1)
	assert.Equal(t, "yield_time_ms", ErrorFor(err).Field)
	_, _, err = collectLimits(0, DefaultExecYieldMS, MaxInteractiveOut+1)
	assert.Equal(t, "max_output_bytes", ErrorFor(err).Field)
}

// TestCheckGitInput: a field given to a command it is not for is refused on
// that field, and a changing command on a read-only workspace on command.
func TestCheckGitInput(t *testing.T) {
	require.NoError(t, checkGitInput(GitInput{Command: "log", Limit: 3}, false))
	require.NoError(t, checkGitInput(GitInput{Command: "commit", Message: "m", Paths: []string{"a"}}, true))
	for in, field := range map[*GitInput]string{
		{Command: "status", Limit: 1}:             "limit",
		{Command: "push", Message: "m"}:           "message",
		{Command: "commit", ForceWithLease: true}: "force_with_lease",
		{Command: "rollback", Label: "x"}:         "label",
		{Command: "checkpoint", Checkpoint: 2}:    "checkpoint",
		{Command: "log", Paths: []string{}}:       "paths",
	} {
		assert.Equal(t, field, ErrorFor(checkGitInput(*in, true)).Field, in.Command)
	}
	assert.Equal(t, "command", ErrorFor(checkGitInput(GitInput{Command: "push"}, false)).Field)
}

// TestGitTexts: the text of a diff, a log and the checkpoints.
func TestGitTexts(t *testing.T) {
	assert.Equal(t, "No changes against the base commit "+short(strings.Repeat("a", 40))+".\n", diffText(sandboxapi.Diff{BaseCommit: strings.Repeat("a", 40)}))
	assert.Equal(t, "P\n(the diff is cut: 9 bytes in all; name paths to see less)\n", diffText(sandboxapi.Diff{Patch: "P", Truncated: true, TotalBytes: 9}))
	assert.Equal(t, short(strings.Repeat("b", 40))+" 2026-01-01 A: s\n(older commits exist)\n",
		logText(sandboxapi.LogResult{Commits: []sandboxapi.LogCommit{{Commit: strings.Repeat("b", 40), Date: "2026-01-01", AuthorName: "A", Subject: "s"}}, Truncated: true}))
	assert.Equal(t, "No checkpoints yet.\n", checkpointsText(nil))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.Equal(t, "1 2026-01-02T03:04:05Z l (2 files changed, HEAD "+short(strings.Repeat("c", 40))+")\n",
		checkpointsText([]sandboxapi.Checkpoint{{ID: 1, CreatedAt: at, Label: "l", FilesChanged: 2, Head: strings.Repeat("c", 40)}}))
}

// TestToolArgumentsWithDuplicateKeysAreRefused: a tool's arguments with a
// duplicate key — exact, in another case ("Path" beside "path", which the
// field decoding would take either of), nested — are InvalidArgument naming
// the key, and the tool does not run; a map's keys that differ in case are
// two keys.
func TestToolArgumentsWithDuplicateKeysAreRefused(t *testing.T) {
	type in struct {
		Path string            `json:"path"`
		Env  map[string]string `json:"env,omitempty"`
	}
	ran := 0
	tool := newTool("dup_probe", "probe", nil, nil, func(_ context.Context, _ call, v in) (struct{}, string, error) {
		ran++
		return struct{}{}, v.Path, nil
	})
	for args, key := range map[string]string{
		`{"path":"a","path":"b"}`:              "path",
		`{"path":"a","Path":"../b"}`:           "Path",
		`{"path":"a","env":{"X":"1","X":"2"}}`: "env.X",
	} {
		_, _, err := tool.run(context.Background(), call{}, json.RawMessage(args))
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, args)
		assert.Contains(t, sandboxapi.Message(err), `duplicate key "`+key+`"`, args)
	}
	require.Zero(t, ran)
	_, text, err := tool.run(context.Background(), call{}, json.RawMessage(`{"path":"a","env":{"X":"1","x":"2"}}`))
	require.NoError(t, err)
	assert.Equal(t, "a", text)
}

// sandbox_shell and sandbox_exec take their shell command under the same
// name, command (documented, in both schemas), and both still accept cmd,
// sandbox_exec's first name (deprecated in the schemas), so callers of
// either keep working; neither name is required by the schema, the tool
// refuses a call with no command or two different ones.
func TestShellAndExecTakeTheCommandUnderOneName(t *testing.T) {
	for _, tl := range Tools(AllCaps) {
		if tl.Def.Name != Shell && tl.Def.Name != ExecToolName {
			continue
		}
		in, err := json.Marshal(tl.Def.InputSchema)
		require.NoError(t, err)
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
				Deprecated  bool   `json:"deprecated"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		require.NoError(t, json.Unmarshal(in, &schema))
		require.Contains(t, schema.Properties, "command", tl.Def.Name)
		assert.False(t, schema.Properties["command"].Deprecated, tl.Def.Name)
		assert.Contains(t, schema.Properties["command"].Description, "a shell command", tl.Def.Name)
		require.Contains(t, schema.Properties, "cmd", tl.Def.Name)
		assert.True(t, schema.Properties["cmd"].Deprecated, "%s: cmd is the old name", tl.Def.Name)
		assert.NotContains(t, schema.Required, "cmd", tl.Def.Name)
		assert.NotContains(t, schema.Required, "command", "%s: a caller of cmd must pass the schema", tl.Def.Name)
		for _, args := range []string{`{"command": "true"}`, `{"cmd": "true"}`} {
			var v any
			require.NoError(t, json.Unmarshal([]byte(args), &v))
			assert.NoError(t, tl.in.Validate(v), "%s %s", tl.Def.Name, args)
		}
		for args, field := range map[string]string{`{}`: "command", `{"command": " "}`: "command", `{"cmd": ""}`: "command", `{"command": "true", "cmd": "false"}`: "cmd"} {
			_, _, err := tl.run(context.Background(), call{}, json.RawMessage(args))
			require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "%s %s", tl.Def.Name, args)
			var e *sandboxapi.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, field, e.Field, "%s %s", tl.Def.Name, args)
		}
	}
	for _, c := range []struct{ command, cmd, want string }{{"a", "", "a"}, {"", "b", "b"}, {"c", "c", "c"}} {
		got, err := commandArg(c.command, c.cmd)
		require.NoError(t, err)
		assert.Equal(t, c.want, got)
	}
}

// sandbox_shell's default is 16 KiB per stream (what is cut stays readable
// with sandbox_output), and its schema says so.
func TestShellOutputDefaultIsSmall(t *testing.T) {
	assert.Equal(t, 16<<10, DefaultShellOutputBytes)
	for _, tl := range Tools(AllCaps) {
		if tl.Def.Name == Shell {
			in, err := json.Marshal(tl.Def.InputSchema)
			require.NoError(t, err)
			assert.Contains(t, string(in), "(default 16384)")
			assert.Contains(t, string(in), "kept for sandbox_output")
		}
	}
}

// The server's instructions name every tool the workspace gets, whatever
// its capabilities: the list is derived from the tool set.
func TestInstructionsNameEveryTool(t *testing.T) {
	for _, caps := range []Caps{{}, {Known: true}, {Known: true, Writable: true}, AllCaps} {
		text := Instructions(caps)
		for _, name := range Names(caps) {
			assert.Contains(t, text, name, "%+v: %s", caps, text)
		}
	}
	assert.Len(t, Names(AllCaps), 10)
}

// A search stopped by its file limit with no match never tells the model
// that more matches exist; files skipped for their size are named.
func TestSearchTextSaysWhyItStopped(t *testing.T) {
	filesCap := SearchText(sandboxapi.SearchResult{Matches: []sandboxapi.SearchMatch{}, Truncated: true, TruncatedBy: sandboxapi.SearchCapFiles,
		SkippedTooLarge: []string{"big.log"}, SkippedTooLargeCount: 1})
	require.Contains(t, filesCap, "No matches.")
	require.NotContains(t, filesCap, "more matches")
	require.Contains(t, filesCap, "files were left unsearched")
	require.Contains(t, filesCap, "big.log")
	resultsCap := SearchText(sandboxapi.SearchResult{Matches: []sandboxapi.SearchMatch{{Path: "a", Line: 1, Text: "x"}}, Truncated: true, TruncatedBy: sandboxapi.SearchCapResults})
	require.Contains(t, resultsCap, "more matches exist")
}
