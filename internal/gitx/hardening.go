package gitx

import "os"

// fixedProtocols are the protocols hardening names explicitly; any other
// protocol.<name>.allow found in a repository is overridden to "never".
var fixedProtocols = map[string]bool{"https": true, "ssh": true, "git": true, "ext": true, "fd": true, "file": true, "http": true}

// sshCommand is the only ssh git ever runs: no prompts, host keys pinned on first use.
const sshCommand = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new"

// hardening is prepended to every call (DESIGN.md non-negotiables): `-c` on the
// command line outranks every config file, so an agent's `git config
// core.fsmonitor …` in a workspace cannot run code in host-side git. Keys whose
// names embed a user-chosen part (filter.<driver>.clean …) cannot be reached
// this way: Inspect finds those.
func (r *Runner) hardening() []string {
	proto := func(name string, ok bool) string {
		if ok {
			return "protocol." + name + ".allow=always"
		}
		return "protocol." + name + ".allow=never"
	}
	return []string{
		"--no-pager",
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "core.untrackedCache=false",
		"-c", "core.sshCommand=" + sshCommand,
		"-c", "core.askPass=",
		"-c", "core.alternateRefsCommand=true",
		"-c", "core.protectNTFS=true",
		"-c", "core.protectHFS=true",
		// Line endings are the attributes' business only (the checkout
		// baseline of internal/workspace relies on it), never the config's.
		"-c", "core.autocrlf=false",
		"-c", "core.eol=lf",
		"-c", "core.safecrlf=false",
		"-c", "credential.helper=",
		"-c", "diff.external=",
		"-c", "core.pager=cat",
		"-c", "core.editor=false",
		"-c", "sequence.editor=false",
		"-c", "gpg.program=false",
		"-c", "gpg.openpgp.program=false",
		"-c", "gpg.x509.program=false",
		"-c", "gpg.ssh.program=false",
		"-c", "log.showSignature=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
		"-c", "commit.gpgSign=false",
		"-c", "tag.gpgSign=false",
		"-c", "push.gpgSign=false",
		"-c", "submodule.recurse=false",
		"-c", "fetch.recurseSubmodules=false",
		"-c", "protocol.allow=never",
		"-c", proto("https", true),
		"-c", proto("ssh", true),
		"-c", proto("git", false),
		"-c", proto("ext", false),
		"-c", proto("fd", false),
		"-c", proto("file", r.allowFile),
		"-c", proto("http", r.allowHTTP),
		"-c", "http.followRedirects=false",
		"-c", "http.proxy=",
		"-c", "http.sslVerify=true",
		"-c", "http.saveCookies=false",
		"-c", "http.cookieFile=",
		"-c", "safe.bareRepository=all",
		"-c", "advice.detachedHead=false",
		"-c", "init.defaultBranch=main",
	}
}

// baseEnv is the complete environment of a git call: nothing is inherited
// from the worker but PATH.
func (r *Runner) baseEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.emptyHome,
		"XDG_CONFIG_HOME=" + r.emptyHome,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GCM_INTERACTIVE=never",
		"GIT_SSH_COMMAND=" + sshCommand,
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat",
		"LC_ALL=C",
		"LANG=C",
	}
}
