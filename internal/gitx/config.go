package gitx

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Actions taken on a poisoned configuration variable (Poison.Action).
const (
	// ActionNeutralized: host-side git never acts on it: a fixed hardening
	// option or a per-call override outranks it on every call.
	ActionNeutralized = "neutralized"
	// ActionRefused: it cannot be overridden and could redirect a network
	// call; network calls (fetch, ls-remote, push …) refuse to run while it
	// is present (ErrCommandRejected). Other calls are unaffected.
	ActionRefused = "network calls refused"
	// ActionReported: host-side git does not act on it in the calls
	// sandboxcore makes, or it cannot be neutralized; it is only reported
	// (docs/SECURITY.md "Known gaps").
	ActionReported = "reported"
)

// Poison is one variable of a repository's own configuration (local,
// worktree or included scope) that would make git run a program, send data
// elsewhere or weaken a check. Repository configuration is agent-writable
// (an agent's `git config` in its worktree writes the repo cache's config),
// so none of it is trusted.
type Poison struct {
	// Key is the variable as git lists it (section and name lowercased).
	Key string
	// Scope is git's --show-scope of its origin ("local", "worktree", …).
	Scope string
	// Action is ActionNeutralized, ActionRefused or ActionReported.
	Action string
	// Why says what the variable would do.
	Why string
}

// String renders the poison for a log line; the key is quoted (it may hold
// any character an agent chose) and the value, which may be long or
// sensitive, is never included.
func (p Poison) String() string {
	return p.quotedKey() + " (" + p.Scope + "): " + p.Why + "; " + p.Action
}

func (p Poison) quotedKey() string { return strconv.Quote(clipText(p.Key)) }

// Inspection is what Inspect found in a repository's own configuration.
type Inspection struct {
	// Poisoned lists every dangerous variable found, in configuration order
	// (empty for a clean repository). Callers log it as a warning.
	Poisoned []Poison
	// overrides are added to every call on the repository (after Call.Config).
	overrides []ConfigEntry
	// keys are the variables the repository's configuration sets (any scope
	// but "command"), as `git config --list` names them (section and name
	// lower-cased).
	keys map[string]bool
}

// Sets reports whether the inspected configuration (not the runner's own
// `-c` hardening) sets key, written as `git config --list` names it
// (section and variable name lower-case, e.g. "core.attributesfile"). A nil
// Inspection sets nothing.
func (in *Inspection) Sets(key string) bool {
	return in != nil && in.keys[key]
}

// Redirects returns the poisoned variables that make network calls refuse
// (ActionRefused).
func (in *Inspection) Redirects() []Poison {
	if in == nil {
		return nil
	}
	var out []Poison
	for _, p := range in.Poisoned {
		if p.Action == ActionRefused {
			out = append(out, p)
		}
	}
	return out
}

// Overrides returns the per-call configuration entries that neutralize the
// repository's dangerous variables (Run adds them to every call by itself).
func (in *Inspection) Overrides() []ConfigEntry {
	if in == nil {
		return nil
	}
	return append([]ConfigEntry(nil), in.overrides...)
}

// inspectTimeout bounds the configuration read of one call (an include.path
// naming a FIFO must not hold a call for its whole timeout).
const inspectTimeout = 30 * time.Second

// Inspect reads the configuration git would use for a call in c.Dir with
// c.Env (GIT_DIR, GIT_WORK_TREE …; the repository's config, its
// config.worktree when extensions.worktreeConfig is set, and every file they
// include: `git config --list --show-scope --includes -z`, run with the same
// hardening) and returns the dangerous variables found and the overrides
// that neutralize them (within a ReuseInspections scope, the scope's
// inspection of the same directory and environment when it has one). Run
// does this before every call by itself (once per repository and scope for
// local calls); callers
// use Inspect to report Poisoned (as a warning) and may pass the result as
// Call.Inspection to the following calls on the same repository. Outside a
// repository the result is empty. Errors: an *Error (e.g. a malformed
// config file: Classify it), ctx's error.
//
// The result is a snapshot: a variable added between the inspection and a
// call (by a process still running, e.g. an agent's background command in
// the local runtime) is not overridden for that call. The fixed options of
// the hardening do not depend on it; docs/SECURITY.md "Known gaps".
func (r *Runner) Inspect(ctx context.Context, c Call) (*Inspection, error) {
	if c.Dir == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: Call.Dir is required")
	}
	env, _, err := splitConfigEnv(c.Env)
	if err != nil {
		return nil, err
	}
	return r.inspectIn(ctx, scopeOf(ctx), c.Dir, env, false)
}

// inspectIn is inspect through scope (nil: none): a local call's
// inspection is the scope's when it has one for dir and env; a fresh one
// (always for a network call) becomes the scope's.
func (r *Runner) inspectIn(ctx context.Context, scope *inspectionScope, dir string, env []string, network bool) (*Inspection, error) {
	key := scopeEntry(dir, env)
	if scope != nil && !network {
		if ins := scope.get(key); ins != nil {
			return ins, nil
		}
	}
	ins, err := r.inspect(ctx, dir, env)
	if err == nil && scope != nil {
		scope.put(key, ins)
	}
	return ins, err
}

func (r *Runner) inspect(ctx context.Context, dir string, env []string) (*Inspection, error) {
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	args := append([]string{"-C", dir}, r.hardening()...)
	args = append(args, "config", "--list", "--show-scope", "--includes", "-z")
	c := Call{Dir: dir, Args: []string{"config", "--list", "--show-scope", "--includes", "-z"}}
	out, _, err := r.runOnce(ctx, c, args, append(r.baseEnv(), env...), nil, nil)
	if err != nil {
		return nil, err
	}
	list := parseConfigList(out)
	in := analyze(list)
	in.keys = map[string]bool{}
	for _, e := range list {
		if e.Scope != "command" {
			in.keys[e.Key] = true
		}
	}
	return in, nil
}

// scopedEntry is one line of `git config --list --show-scope -z`.
type scopedEntry struct {
	Scope string
	ConfigEntry
}

// parseConfigList parses `git config --list --show-scope -z` output:
// "<scope>\0<key>\n<value>\0", or "<scope>\0<key>\0" for a key without value.
func parseConfigList(out []byte) []scopedEntry {
	fields := strings.Split(string(out), "\x00")
	var list []scopedEntry
	for i := 0; i+1 < len(fields); i += 2 {
		key, value, _ := strings.Cut(fields[i+1], "\n")
		list = append(list, scopedEntry{Scope: fields[i], ConfigEntry: ConfigEntry{Key: key, Value: value}})
	}
	return list
}

// splitKey splits section[.subsection].name; the subsection may hold dots.
func splitKey(key string) (section, sub, name string, ok bool) {
	i := strings.IndexByte(key, '.')
	j := strings.LastIndexByte(key, '.')
	if i <= 0 || j == len(key)-1 {
		return "", "", "", false
	}
	if i == j {
		return strings.ToLower(key[:i]), "", strings.ToLower(key[j+1:]), true
	}
	return strings.ToLower(key[:i]), key[i+1 : j], strings.ToLower(key[j+1:]), true
}

// httpOverrides are the safe values of URL-scoped http.<url>.<name> keys; a
// repository's http.<url>.<name> is overridden at the same URL (same
// specificity, defined later: git takes the later one).
var httpOverrides = map[string]string{
	"proxy":           "",      // a proxy would see every request
	"sslverify":       "true",  // TLS checks stay on
	"savecookies":     "false", // git would write a file anywhere
	"cookiefile":      "",      // … or read one
	"followredirects": "false", // the credential is never replayed elsewhere
	"curloptresolve":  "",      // no pinning a host to another address
	"extraheader":     "",      // the repository's own headers are dropped (the credential's comes after)
	"emptyauth":       "false",
}

// httpReported are http.* keys that cannot be given a neutral value; they
// are reported.
var httpReported = map[string]string{
	"sslcainfo": "trusts another CA", "sslcapath": "trusts other CAs", "sslcert": "sends a client certificate",
	"sslkey": "uses a client key", "pinnedpubkey": "pins another key", "proxysslcainfo": "trusts another proxy CA",
	"sslbackend": "selects another TLS backend", "sslcipherlist": "changes the TLS ciphers", "sslversion": "changes the TLS version",
}

// fixedNeutralized are variables without a user-chosen part that a fixed
// hardening option already outranks; they are reported as neutralized.
var fixedNeutralized = map[string]string{
	"core.fsmonitor":            "runs a program on every status-like command",
	"core.hookspath":            "runs hooks from another directory",
	"core.sshcommand":           "runs a program instead of ssh",
	"core.askpass":              "runs a program to ask for credentials",
	"core.pager":                "runs a pager program",
	"core.editor":               "runs an editor program",
	"core.alternaterefscommand": "runs a program during fetch negotiation",
	"core.protectntfs":          "weakens path checks",
	"core.protecthfs":           "weakens path checks",
	"credential.helper":         "runs a credential helper program",
	"diff.external":             "runs an external diff program",
	"sequence.editor":           "runs an editor program",
	"gpg.program":               "runs a signing program",
	"log.showsignature":         "runs the signature verifier",
	"protocol.allow":            "allows other transports",
	"http.proxy":                "sends requests through a proxy",
	"http.sslverify":            "disables TLS verification",
	"http.savecookies":          "writes a cookie file",
	"http.cookiefile":           "reads a cookie file",
	"http.followredirects":      "follows redirects to other hosts",
	"submodule.recurse":         "runs git in submodules",
	"fetch.recursesubmodules":   "fetches submodules",
	"gc.auto":                   "runs gc from host-side calls",
	"maintenance.auto":          "runs maintenance from host-side calls",
	"commit.gpgsign":            "runs a signing program",
	"tag.gpgsign":               "runs a signing program",
	"push.gpgsign":              "runs a signing program",
}

// clipText cuts s to 200 bytes for messages.
func clipText(s string) string { return sandboxapi.Clip(s, 200) }

// quoted renders an agent-chosen part of a key (a URL, a transport name) in a
// reason text: clipped and Go-quoted, so no control character (a terminal
// escape, a carriage return) reaches a log line or a CLI warning raw.
func quoted(s string) string { return strconv.Quote(clipText(s)) }
