package gitx

import "strings"

// analyze finds the dangerous variables of a repository's configuration and
// the overrides that neutralize them. Entries of scope "command" (the
// runner's own options and per-call entries) are ignored. Each variable is
// judged by fixedNeutralized (section.name without subsection) or else by
// its section's rule in sectionRules.
func analyze(list []scopedEntry) *Inspection {
	a := newAnalysis()
	for _, e := range list {
		if e.Scope == "command" {
			continue
		}
		v, ok := newConfigVar(e)
		if !ok {
			continue
		}
		if v.sub == "" {
			if why, ok := fixedNeutralized[v.section+"."+v.name]; ok {
				a.poison(v, ActionNeutralized, why)
				continue
			}
		}
		if rule, ok := sectionRules[v.section]; ok {
			rule(a, v)
		}
	}
	return a.in
}

// analysis collects an Inspection: poisoned variables in configuration
// order and overrides, each override key once (the first value wins).
type analysis struct {
	in   *Inspection
	done map[string]bool // override keys already added
}

func newAnalysis() *analysis {
	return &analysis{in: &Inspection{}, done: map[string]bool{}}
}

// override adds the per-call entry key=value unless key has one already.
func (a *analysis) override(key, value string) {
	if !a.done[key] {
		a.done[key] = true
		a.in.overrides = append(a.in.overrides, ConfigEntry{Key: key, Value: value})
	}
}

// poison records v as dangerous with action and the reason why.
func (a *analysis) poison(v configVar, action, why string) {
	a.in.Poisoned = append(a.in.Poisoned, Poison{Key: v.Key, Scope: v.Scope, Action: action, Why: why})
}

// configVar is one entry with its key split (splitKey): section and name
// lowercased, the subsection as written.
type configVar struct {
	scopedEntry
	section, sub, name string
}

func newConfigVar(e scopedEntry) (configVar, bool) {
	section, sub, name, ok := splitKey(e.Key)
	return configVar{scopedEntry: e, section: section, sub: sub, name: name}, ok
}

// sectionRules judge the variables of one configuration section each (after
// fixedNeutralized). A section without a rule is harmless.
var sectionRules = map[string]func(*analysis, configVar){
	"filter":     filterRule,
	"diff":       diffRule,
	"merge":      mergeRule,
	"http":       httpRule,
	"credential": credentialRule,
	"url":        urlRule,
	"remote":     remoteRule,
	"protocol":   protocolRule,
	"core":       coreRule,
	"gpg":        gpgRule,
	"include":    includeRule,
	"includeif":  includeRule,
	"extensions": extensionsRule,
	"uploadpack": uploadpackRule,
	"submodule":  submoduleRule,
	"trailer":    trailerRule,
	"pager":      pagerRule,
}

// filterRule: every filter.<driver>.* key disables the whole driver, so a
// .gitattributes line naming it runs nothing (clean/smudge/process empty =
// no filter; required=false = not an error).
func filterRule(a *analysis, v configVar) {
	if v.sub == "" {
		return
	}
	p := "filter." + v.sub + "."
	a.override(p+"clean", "")
	a.override(p+"smudge", "")
	a.override(p+"process", "")
	a.override(p+"required", "false")
	if v.name == "clean" || v.name == "smudge" || v.name == "process" {
		a.poison(v, ActionNeutralized, "runs a filter program on add, status, diff and checkout")
	}
}

// diffRule: diff.<driver>.command fails (it is only used without
// --no-ext-diff, which every diff passes); diff.<driver>.textconv becomes
// the identity conversion (--no-textconv is passed where diffs are made).
func diffRule(a *analysis, v configVar) {
	switch {
	case v.sub == "":
	case v.name == "command":
		a.override(v.Key, "false")
		a.poison(v, ActionNeutralized, "runs an external diff program")
	case v.name == "textconv":
		a.override(v.Key, "cat")
		a.override("diff."+v.sub+".cachetextconv", "false")
		a.poison(v, ActionNeutralized, "runs a text conversion program on diff")
	}
}

// mergeRule: merge.<driver>.driver fails, so the file conflicts instead.
func mergeRule(a *analysis, v configVar) {
	if v.sub != "" && v.name == "driver" {
		a.override(v.Key, "false")
		a.poison(v, ActionNeutralized, "runs a merge driver program")
	}
}

// httpRule: URL-scoped http.<url>.<name> keys get httpOverrides' safe value
// at the same URL; what cannot be neutralized (httpReported) is reported.
func httpRule(a *analysis, v configVar) {
	if v.sub == "" {
		if why, ok := httpReported[v.name]; ok {
			a.poison(v, ActionReported, why)
		}
		return
	}
	if val, ok := httpOverrides[v.name]; ok {
		a.override(v.Key, val)
		a.poison(v, ActionNeutralized, "changes how requests to "+quoted(v.sub)+" are sent")
	} else if why, ok := httpReported[v.name]; ok {
		a.poison(v, ActionReported, why+" for "+quoted(v.sub))
	}
}

// credentialRule: the fixed credential.helper= resets every helper list
// (all matching credential.* entries apply, in order).
func credentialRule(a *analysis, v configVar) {
	if v.name == "helper" {
		a.poison(v, ActionNeutralized, "runs a credential helper program")
	}
}

// urlRule: URL rewrites cannot be overridden: network calls refuse.
func urlRule(a *analysis, v configVar) {
	if v.name == "insteadof" || v.name == "pushinsteadof" {
		a.poison(v, ActionRefused, "rewrites remote URLs to "+quoted(v.sub))
	}
}

// remoteRule: git looks a URL up as a remote name first, so a remote named
// like a URL (remote.<url>.url replaces the URL, remote.<url>.uploadpack the
// command …) refuses network calls, as do a remote's uploadpack,
// receivepack (git keeps the first value it reads: the repository's) and vcs;
// a remote's proxy is overridden.
func remoteRule(a *analysis, v configVar) {
	if v.sub == "" {
		return
	}
	if strings.ContainsAny(v.sub, "/:") {
		a.poison(v, ActionRefused, "configures the remote git uses for that URL")
		return
	}
	switch v.name {
	case "uploadpack", "receivepack":
		a.poison(v, ActionRefused, "runs another "+v.name+" program when a call names this remote")
	case "vcs":
		a.poison(v, ActionRefused, "runs a remote helper when a call names this remote")
	case "proxy":
		a.override(v.Key, "")
		a.poison(v, ActionNeutralized, "sends the remote's requests through a proxy")
	}
}

// protocolRule: protocol.<name>.allow is outranked by the hardening for the
// protocols it names (fixedProtocols) and set to "never" for any other.
func protocolRule(a *analysis, v configVar) {
	if v.sub == "" || v.name != "allow" {
		return
	}
	if fixedProtocols[strings.ToLower(v.sub)] {
		a.poison(v, ActionNeutralized, "allows a transport")
		return
	}
	a.override(v.Key, "never")
	a.poison(v, ActionNeutralized, "allows the transport "+quoted(v.sub))
}

// coreRule reports the core.* variables host-side calls do not act on but
// cannot neutralize (the others are in fixedNeutralized).
func coreRule(a *analysis, v configVar) {
	switch v.name {
	case "worktree":
		a.poison(v, ActionReported, "points the repository at another work tree (host-side calls set GIT_WORK_TREE)")
	case "gitproxy":
		a.poison(v, ActionReported, "runs a proxy program for git:// (never an allowed protocol)")
	case "sharedrepository":
		a.poison(v, ActionReported, "changes the permissions of files git creates")
	}
}

// gpgRule: signing is off, so signing programs never run.
func gpgRule(a *analysis, v configVar) {
	if v.name == "program" || v.name == "defaultkeycommand" {
		a.poison(v, ActionNeutralized, "runs a signing program (signing is off)")
	}
}

// includeRule reports include.path and includeif.<cond>.path (the included
// variables are inspected too: --includes).
func includeRule(a *analysis, v configVar) {
	if v.name == "path" {
		a.poison(v, ActionReported, "imports configuration from another file (its variables are inspected too)")
	}
}

// extensionsRule reports per-worktree configuration (inspected too).
func extensionsRule(a *analysis, v configVar) {
	if v.name == "worktreeconfig" {
		a.poison(v, ActionReported, "enables per-worktree configuration files (they are inspected too)")
	}
}

// uploadpackRule: git honors uploadpack.packobjectshook only from protected
// configuration.
func uploadpackRule(a *analysis, v configVar) {
	if v.name == "packobjectshook" {
		a.poison(v, ActionNeutralized, "runs a program in upload-pack (git honors it only from protected configuration)")
	}
}

// submoduleRule reports a submodule's "!command" update (never run host-side).
func submoduleRule(a *analysis, v configVar) {
	if v.sub != "" && v.name == "update" && strings.HasPrefix(v.Value, "!") {
		a.poison(v, ActionReported, "runs a program on `git submodule update` (never run host-side)")
	}
}

// trailerRule reports trailer commands (--trailer is never passed host-side).
func trailerRule(a *analysis, v configVar) {
	if v.sub != "" && (v.name == "command" || v.name == "cmd") {
		a.poison(v, ActionReported, "runs a program on `git commit --trailer` (never passed host-side)")
	}
}

// pagerRule: every pager.* is outranked by --no-pager.
func pagerRule(a *analysis, v configVar) {
	a.poison(v, ActionNeutralized, "runs a pager program (--no-pager)")
}
