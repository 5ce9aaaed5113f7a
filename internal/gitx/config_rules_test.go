package gitx

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each section rule on its own: what it poisons (action) and overrides,
// including the variables of its section it leaves alone.
func TestSectionRules(t *testing.T) {
	type want struct {
		action    string // "" = not poisoned
		overrides []ConfigEntry
	}
	cases := []struct {
		key, value string
		want       want
	}{
		{"filter.lfs.smudge", "x", want{ActionNeutralized, []ConfigEntry{{"filter.lfs.clean", ""}, {"filter.lfs.smudge", ""}, {"filter.lfs.process", ""}, {"filter.lfs.required", "false"}}}},
		{"filter.lfs.required", "true", want{"", []ConfigEntry{{"filter.lfs.clean", ""}, {"filter.lfs.smudge", ""}, {"filter.lfs.process", ""}, {"filter.lfs.required", "false"}}}},
		{"filter.x", "y", want{}},
		{"diff.d.command", "x", want{ActionNeutralized, []ConfigEntry{{"diff.d.command", "false"}}}},
		{"diff.d.textconv", "x", want{ActionNeutralized, []ConfigEntry{{"diff.d.textconv", "cat"}, {"diff.d.cachetextconv", "false"}}}},
		{"diff.d.xfuncname", "x", want{}},
		{"diff.renames", "true", want{}},
		{"merge.m.driver", "x", want{ActionNeutralized, []ConfigEntry{{"merge.m.driver", "false"}}}},
		{"merge.m.name", "x", want{}},
		{"http.https://h/.proxy", "p", want{ActionNeutralized, []ConfigEntry{{"http.https://h/.proxy", ""}}}},
		{"http.https://h/.sslverify", "false", want{ActionNeutralized, []ConfigEntry{{"http.https://h/.sslverify", "true"}}}},
		{"http.https://h/.sslcert", "c", want{ActionReported, nil}},
		{"http.sslcainfo", "c", want{ActionReported, nil}},
		{"http.postbuffer", "1", want{}},
		{"credential.https://h.helper", "x", want{ActionNeutralized, nil}},
		{"credential.https://h.username", "u", want{}},
		{"url.https://e/.insteadof", "https://h/", want{ActionRefused, nil}},
		{"url.https://e/.pushinsteadof", "https://h/", want{ActionRefused, nil}},
		{"remote.https://h/r.url", "x", want{ActionRefused, nil}},
		{"remote.origin.receivepack", "x", want{ActionRefused, nil}},
		{"remote.origin.vcs", "x", want{ActionRefused, nil}},
		{"remote.origin.proxy", "p", want{ActionNeutralized, []ConfigEntry{{"remote.origin.proxy", ""}}}},
		{"remote.origin.url", "https://h/r", want{}},
		{"protocol.HTTPS.allow", "always", want{ActionNeutralized, nil}},
		{"protocol.evil.allow", "always", want{ActionNeutralized, []ConfigEntry{{"protocol.evil.allow", "never"}}}},
		{"core.sharedrepository", "all", want{ActionReported, nil}},
		{"core.gitproxy", "x", want{ActionReported, nil}},
		{"core.bare", "true", want{}},
		{"gpg.x509.program", "x", want{ActionNeutralized, nil}},
		{"gpg.defaultkeycommand", "x", want{ActionNeutralized, nil}},
		{"gpg.format", "ssh", want{}},
		{"includeif.onbranch:main.path", "x", want{ActionReported, nil}},
		{"extensions.worktreeconfig", "true", want{ActionReported, nil}},
		{"extensions.objectformat", "sha256", want{}},
		{"uploadpack.packobjectshook", "x", want{ActionNeutralized, nil}},
		{"submodule.s.update", "!x", want{ActionReported, nil}},
		{"submodule.s.update", "merge", want{}},
		{"trailer.t.cmd", "x", want{ActionReported, nil}},
		{"trailer.t.key", "x", want{}},
		{"pager.diff", "x", want{ActionNeutralized, nil}},
		{"user.name", "x", want{}},
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			v, ok := newConfigVar(scopedEntry{"local", ConfigEntry{c.key, c.value}})
			require.True(t, ok)
			a := newAnalysis()
			if rule, ok := sectionRules[v.section]; ok {
				rule(a, v)
			}
			if c.want.action == "" {
				assert.Empty(t, a.in.Poisoned)
			} else if assert.Len(t, a.in.Poisoned, 1) {
				p := a.in.Poisoned[0]
				assert.Equal(t, Poison{Key: c.key, Scope: "local", Action: c.want.action, Why: p.Why}, p)
				assert.NotEmpty(t, p.Why)
			}
			assert.Equal(t, c.want.overrides, a.in.overrides)
		})
	}
}

// An override key is added once, with its first value; poisons keep their
// order.
func TestAnalysisCollects(t *testing.T) {
	a := newAnalysis()
	a.override("k", "first")
	a.override("k", "second")
	a.override("j", "")
	assert.Equal(t, []ConfigEntry{{"k", "first"}, {"j", ""}}, a.in.overrides)
	v1, _ := newConfigVar(scopedEntry{"local", ConfigEntry{"a.b", ""}})
	v2, _ := newConfigVar(scopedEntry{"worktree", ConfigEntry{"c.d", ""}})
	a.poison(v1, ActionReported, "one")
	a.poison(v2, ActionRefused, "two")
	assert.Equal(t, []Poison{{"a.b", "local", ActionReported, "one"}, {"c.d", "worktree", ActionRefused, "two"}}, a.in.Poisoned)
}

func TestNewConfigVar(t *testing.T) {
	v, ok := newConfigVar(scopedEntry{"local", ConfigEntry{"Remote.Origin.Name.URL", "x"}})
	require.True(t, ok)
	assert.Equal(t, "remote", v.section)
	assert.Equal(t, "Origin.Name", v.sub)
	assert.Equal(t, "url", v.name)
	assert.Equal(t, "x", v.Value)
	_, ok = newConfigVar(scopedEntry{"local", ConfigEntry{"nodot", "x"}})
	assert.False(t, ok)
}

// A variable fixedNeutralized names is judged there, before its section's
// rule (core.fsmonitor is not core's rule's business).
func TestAnalyzeFixedBeforeSectionRules(t *testing.T) {
	in := analyze([]scopedEntry{{"local", ConfigEntry{"core.fsmonitor", "/x"}}, {"local", ConfigEntry{"gpg.program", "/x"}}})
	require.Len(t, in.Poisoned, 2)
	assert.Equal(t, fixedNeutralized["core.fsmonitor"], in.Poisoned[0].Why)
	assert.Equal(t, fixedNeutralized["gpg.program"], in.Poisoned[1].Why)
	assert.Empty(t, in.Overrides())
}
