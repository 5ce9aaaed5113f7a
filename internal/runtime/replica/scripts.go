package replica

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The remote half of the replica mechanism: POSIX sh functions run inside the
// sandbox. They need sh, GNU coreutils, GNU tar (1.29 or later), util-linux's
// flock and git 2.x there (the package documentation lists why).
//
// Remote layout, all below Layout.StateDir ($S), outside the replica:
//
//	$S/sync.git      the bookkeeping repository: its index is the replica's
//	                 stat cache, its tree objects the synced states (never blobs)
//	$S/lock          flock held while a pass collects
//	$S/epoch         a random id of this bookkeeping (new when it is recreated)
//	$S/seq           the number of the last collect in this epoch
//	$S/head          the replica git state last set ("<commit> <branch>")
//	$S/pass/<id>/    one pass: part.N.tar (uploaded), in/ctl (extracted),
//	                 out/ (the result the host downloads)
//
// Exit codes of rp_apply: 0 applied; StatusResync when the base tree is not in
// sync.git (the host must send its whole manifest); StatusNeedGit when the
// replica lacks the commit to check out (the host must send a full bundle);
// any other code is a failure whose text is in out/error.

// Exit codes of the remote apply step (also written to out/status).
const (
	// StatusResync: the base tree the host named is unknown remotely.
	StatusResync = 90
	// StatusNeedGit: the replica's git lacks the commit the host named.
	StatusNeedGit = 91
)

// scriptLib defines the shell functions. Variables the caller sets first:
// W (replica workdir), S (state dir), P (this pass's dir), RP_MODE
// ("incr", "manifest" or "upload"), RP_BASE (the base tree for incr),
// RP_PARTS (number of uploaded parts), RP_LOCKGIT (1: make .git read-only),
// RP_HEAD ("<commit> <branch>", "" for no git state).
const scriptLib = `
export LC_ALL=C GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CEILING_DIRECTORIES
rp_sg() {
	git --git-dir="$S/sync.git" --work-tree="$W" -c core.autocrlf=false -c core.safecrlf=false \
		-c core.fileMode=true -c core.symlinks=true -c core.ignoreCase=false -c core.precomposeUnicode=false \
		-c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false \
		-c core.excludesFile=/dev/null -c core.quotePath=false -c core.checkStat=default -c core.trustctime=true \
		-c gc.auto=0 -c maintenance.auto=false "$@"
}
rp_rg() {
	git -C "$W" -c core.hooksPath=/dev/null -c core.fsmonitor=false -c gc.auto=0 -c maintenance.auto=false "$@"
}
rp_fail() { printf '%s\n' "$2" > "$P/out/error"; echo "$1" > "$P/out/status"; return "$1"; }
rp_init() {
	if [ ! -d "$W" ]; then
		# A workdir outside the user's home: Daytona's images let the user sudo.
		mkdir -p "$W" 2>/dev/null || { sudo -n mkdir -p "$W" && sudo -n chown "$(id -u):$(id -g)" "$W"; } 2>/dev/null || return 1
	fi
	mkdir -p "$S/pass" "$P/in" "$P/out" || return 1
	if [ ! -f "$S/sync.git/HEAD" ]; then
		rm -rf "$S/sync.git" && git init -q --bare "$S/sync.git" >/dev/null || return 1
		printf '* -text -filter -ident -working-tree-encoding -crlf\n' > "$S/sync.git/info/attributes" || return 1
		: > "$S/sync.git/info/exclude"
		od -An -N8 -tx8 /dev/urandom | tr -d ' \n' > "$S/epoch"
		rm -f "$S/seq" "$S/head"
	fi
	# Finished passes older than 10 minutes (their host downloaded the result
	# or gave up), and any pass older than a day.
	for d in $(find "$S/pass" -mindepth 3 -maxdepth 3 -path '*/out/status' -mmin +10 2>/dev/null); do rm -rf "${d%/out/status}"; done
	find "$S/pass" -mindepth 1 -maxdepth 1 -type d -mmin +1440 -exec rm -rf {} + 2>/dev/null
	return 0
}
rp_gitlock() {
	[ -d "$W/.git" ] || return 0
	if [ "$1" = on ]; then find "$W/.git" -type d -perm -u+w -exec chmod a-w {} + 2>/dev/null
	else find "$W/.git" -type d ! -perm -u+w -exec chmod u+w {} + 2>/dev/null; fi
	return 0
}
rp_git() {
	[ -n "${RP_HEAD:-}" ] || return 0
	want=$RP_HEAD
	commit=${want%% *}
	branch=${want#* }
	if [ "$(cat "$S/head" 2>/dev/null)" = "$want" ] && [ "$(rp_rg rev-parse -q --verify HEAD 2>/dev/null)" = "$commit" ] && [ ! -f "$P/in/ctl/bundle" ]; then
		return 0
	fi
	[ -d "$W/.git" ] || rp_rg init -q >/dev/null 2>&1 || { rp_fail 92 "git init of the replica failed"; return; }
	rp_gitlock off
	if [ -f "$P/in/ctl/bundle" ]; then
		rp_rg fetch -q --no-tags "$P/in/ctl/bundle" "+HEAD:refs/sandboxcore/fetch" 2> "$P/out/git.err" ||
			{ rp_fail 92 "git fetch from the bundle failed: $(head -c 2000 "$P/out/git.err")"; return; }
	fi
	if ! rp_rg cat-file -e "$commit^{commit}" 2>/dev/null; then
		rp_gitlock on; echo 91 > "$P/out/status"; return 91
	fi
	if [ -n "$branch" ]; then
		rp_rg update-ref "refs/heads/$branch" "$commit" && rp_rg symbolic-ref HEAD "refs/heads/$branch" ||
			{ rp_fail 92 "setting the replica's branch failed"; return; }
	else
		rp_rg update-ref --no-deref HEAD "$commit" || { rp_fail 92 "detaching the replica's HEAD failed"; return; }
	fi
	rp_rg read-tree "$commit" && rp_rg update-index -q --refresh >/dev/null 2>&1
	rp_rg update-ref -d refs/sandboxcore/fetch 2>/dev/null
	printf '%s' "$want" > "$S/head"
	[ "${RP_LOCKGIT:-0}" = 1 ] && rp_gitlock on
	return 0
}
# rp_guard keeps what the replica changed since the base in the paths the
# host is about to overwrite or delete (ctl/guard): a path whose replica
# state differs from both the base and the host's new state is a conflict.
# The replica's version is moved aside to <path>.remote-conflict (or
# -2, -3, ...: a name neither taken nor being uploaded), so it comes back to
# the host as a new file, and "<path>\0<copy>\0" is written to
# out/conflicts ("<path>\0\0" when the replica deleted it). Object ids
# are computed, never stored (--info-only).
rp_guard() {
	[ "$RP_MODE" = incr ] && [ -s "$P/in/ctl/guard" ] || return 0
	GIT_INDEX_FILE="$P/guard.index" rp_sg read-tree "$RP_BASE" || { rp_fail 92 "read-tree of the base failed"; return; }
	GIT_INDEX_FILE="$P/guard.index" rp_sg update-index -z --add --remove --replace --info-only --stdin < "$P/in/ctl/guard" >/dev/null 2>&1
	GIT_INDEX_FILE="$P/guard.index" rp_sg diff-index --cached -z --name-only --no-renames "$RP_BASE" | sort -z > "$P/guard.base"
	GIT_INDEX_FILE="$P/guard.index" rp_sg diff-index --cached -z --name-only --no-renames "$(cat "$P/hv")" | sort -z > "$P/guard.host"
	rm -f "$P/guard.index"
	sort -z "$P/in/ctl/guard" > "$P/guard.sent"
	comm -z -12 "$P/guard.base" "$P/guard.host" | comm -z -12 - "$P/guard.sent" > "$P/guard.both"
	: > "$P/out/conflicts"
	if [ -s "$P/guard.both" ]; then
		# shellcheck disable=SC2016
		xargs -0 -r sh -c '
			W=$1; sent=$2; failed=$3; shift 3
			for f in "$@"; do
				if [ -e "$W/$f" ] || [ -L "$W/$f" ]; then
					# The name clipped to 200 bytes, as the host does
					# (copyStem): the copy fits in 255.
					b=${f##*/}; d=${f%"$b"}
					stem=$d$(printf "%s" "$b" | head -c 200).remote-conflict
					c=$stem; n=2
					while [ -e "$W/$c" ] || [ -L "$W/$c" ] || grep -qzxF -- "$c" "$sent"; do c=$stem-$n; n=$((n + 1)); done
					mv -f -- "$W/$f" "$W/$c" || { printf "%s" "$f" > "$failed"; exit 1; }
					printf "%s\0%s\0" "$f" "$c"
				else
					printf "%s\0\0" "$f"
				fi
			done' sh "$W" "$P/guard.sent" "$P/guard.failed" < "$P/guard.both" >> "$P/out/conflicts"
		if [ -f "$P/guard.failed" ]; then
			# The sandbox's version cannot be kept beside it (its name is too
			# long, say): nothing of the host's goes over it.
			rp_fail 92 "the sandbox's version of $(head -c 300 "$P/guard.failed") changed on both sides and cannot be kept beside it (rename the file)"
			return
		fi
	fi
	rm -f "$P/guard.base" "$P/guard.host" "$P/guard.sent" "$P/guard.both"
	return 0
}
rp_apply() {
	rp_init || { mkdir -p "$P/out"; rp_fail 92 "cannot create $W or $S"; return; }
	if [ "$RP_PARTS" -gt 0 ]; then
		tar -x -f "$P/part.0.tar" -C "$P/in" ctl || { rp_fail 92 "the pass's control files do not extract"; return; }
	fi
	if [ "$RP_MODE" = incr ] && ! rp_sg cat-file -e "$RP_BASE^{tree}" 2>/dev/null; then
		echo 90 > "$P/out/status"; return 90
	fi
	# The host's view first: its tree does not depend on the workdir.
	if [ "$RP_MODE" = incr ]; then
		GIT_INDEX_FILE="$P/hv.index" rp_sg read-tree "$RP_BASE" || { rp_fail 92 "read-tree of the base failed"; return; }
	else
		GIT_INDEX_FILE="$P/hv.index" rp_sg read-tree --empty || { rp_fail 92 "read-tree --empty failed"; return; }
	fi
	if [ -s "$P/in/ctl/hv" ]; then
		GIT_INDEX_FILE="$P/hv.index" rp_sg update-index -z --index-info < "$P/in/ctl/hv" 2> "$P/out/git.err" ||
			{ rp_fail 92 "building the host's view failed: $(head -c 2000 "$P/out/git.err")"; return; }
	fi
	GIT_INDEX_FILE="$P/hv.index" rp_sg write-tree --missing-ok > "$P/hv" || { rp_fail 92 "write-tree of the host's view failed"; return; }
	rm -f "$P/hv.index"
	rp_guard || return
	if [ -s "$P/in/ctl/del" ]; then
		(cd "$W" && xargs -0 rm -f -- < "$P/in/ctl/del") 2>/dev/null
		(cd "$W" && tr '\0' '\n' < "$P/in/ctl/del" | sed -n 's|/[^/]*$||p' | sort -u -r | xargs -r -d '\n' rmdir -p --ignore-fail-on-non-empty -- ) 2>/dev/null
	fi
	i=0
	while [ "$i" -lt "$RP_PARTS" ]; do
		tar -x -p -m -f "$P/part.$i.tar" -C "$W" --strip-components=1 --no-same-owner w 2> "$P/out/tar.err" ||
			{ rp_fail 92 "extracting the host's changes failed: $(head -c 2000 "$P/out/tar.err")"; return; }
		rm -f "$P/part.$i.tar"
		i=$((i + 1))
	done
	if [ -s "$P/in/ctl/add" ]; then
		rp_sg update-index -z --add --remove --replace --info-only --stdin < "$P/in/ctl/add" >/dev/null 2>&1
	fi
	rp_git || return
	return 0
}
rp_collect() {
	mkdir -p "$P/out"
	exec 8> "$S/lock" && flock 8
	rp_sg ls-files -z -m -d -o --exclude-standard 2>/dev/null > "$P/listed"
	grep -z -v '/$' "$P/listed" > "$P/changed"
	# Directories listed as such hold a nested git repository: never synced
	# (their .git would carry hooks and config to the host); named in the
	# result so the host can say so.
	grep -z '/$' "$P/listed" | head -z -n 100 > "$P/out/nested"
	rm -f "$P/listed"
	if [ -s "$P/changed" ]; then
		# --replace: a file that became a directory (or the reverse) takes
		# the place of its old entries instead of stopping the update.
		rp_sg update-index -z --add --remove --replace --info-only --stdin < "$P/changed" >/dev/null 2> "$P/out/warnings"
	fi
	post=$(rp_sg write-tree --missing-ok) || { exec 8>&-; rp_fail 92 "write-tree of the replica failed"; return; }
	hv=$(cat "$P/hv")
	rp_sg diff-tree -r -z --no-renames --raw "$hv" "$post" > "$P/out/diff" || { exec 8>&-; rp_fail 92 "diff-tree failed"; return; }
	seq=$(( $(cat "$S/seq" 2>/dev/null || echo 0) + 1 ))
	echo "$seq" > "$S/seq"
	exec 8>&-
	echo "$post" > "$P/out/tree"
	echo "$seq" > "$P/out/seq"
	cat "$S/epoch" > "$P/out/epoch" 2>/dev/null
	rp_sg diff-tree -r -z --no-renames --name-only --diff-filter=AMT "$hv" "$post" > "$P/names"
	tar -c -f "$P/out/changes.tar" -C "$W" --no-recursion --null --verbatim-files-from -T "$P/names" 2>> "$P/out/warnings"
	[ -f "$P/out/changes.tar" ] || tar -c -f "$P/out/changes.tar" -T /dev/null
	echo 0 > "$P/out/status"
	return 0
}
`

// ShQuote returns s as one sh word (single-quoted).
func ShQuote(s string) string { return shQuote(s) }

// shQuote returns s as one sh word: single-quoted, with each ' written as '\”.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Vars returns the sh assignments of this pass's variables (W, S, P, RP_MODE,
// RP_BASE, RP_PARTS, RP_LOCKGIT, RP_HEAD), one per line, for a script that then
// includes Lib and calls rp_apply and rp_collect.
func (p *Pass) Vars() string {
	head := ""
	if p.head != "" {
		head = p.head + " " + p.branch
	}
	lock := "0"
	if p.r.lockGit {
		lock = "1"
	}
	return "W=" + shQuote(p.remote.Workdir) + "\nS=" + shQuote(p.remote.StateDir) +
		"\nP=" + shQuote(p.Dir()) + "\nRP_MODE=" + string(p.mode) + "\nRP_BASE=" + shQuote(p.base) +
		"\nRP_PARTS=" + itoa(len(p.parts)) + "\nRP_LOCKGIT=" + lock + "\nRP_HEAD=" + shQuote(head) + "\n"
}

// Lib returns the shell functions rp_apply and rp_collect (and their
// helpers) that a remote script runs after Vars: rp_apply before the
// command (it writes the host's changes into the replica and sets its git
// state), rp_collect after it (it writes the result the host downloads into
// $P/out). A backend that runs its own command wrapper embeds both; Sync
// uses them alone.
func Lib() string { return scriptLib }

func itoa(n int) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{digits[n%10]}, b...)
		n /= 10
	}
	return string(b)
}

// ExecFunction returns the sh function x_exec, which runs cmd in a new
// session (the process group a watchdog kills) with exactly env (env -i,
// "K=V" entries) and its argv verbatim: a word of valid UTF-8 is
// single-quoted, any other byte string is decoded from base64 into a
// variable first (sh quoting cannot carry every byte string).
func ExecFunction(env, cmd []string) string {
	var decl strings.Builder
	n := 0
	word := func(s string) string {
		if utf8.ValidString(s) {
			return shQuote(s)
		}
		v := strconv.Itoa(n)
		n++
		fmt.Fprintf(&decl, "\tv%s=$(printf %%s %s | base64 -d; printf x); v%s=${v%s%%x}\n", v, shQuote(base64.StdEncoding.EncodeToString([]byte(s))), v, v)
		return `"$v` + v + `"`
	}
	envWords := make([]string, 0, len(env))
	for _, kv := range env {
		envWords = append(envWords, word(kv))
	}
	argv := make([]string, 0, len(cmd))
	for _, a := range cmd {
		argv = append(argv, word(a))
	}
	var b strings.Builder
	b.WriteString("x_exec() {\n")
	b.WriteString(decl.String())
	fmt.Fprintf(&b, "\texec setsid env -i %s /bin/sh -c 'unset PWD; exec \"$@\"' sh %s\n}\n", strings.Join(envWords, " "), strings.Join(argv, " "))
	return b.String()
}

// KillFunction is the sh function x_kill PID: it kills PID's process group
// and every process of its session — everything a command started except
// processes that left its session (setsid). It always returns 0. It reads
// the session from /proc/<pid>/stat with parameter expansions only (no
// word splitting, which zsh does not do), so that it works in zsh and bash
// as in sh.
const KillFunction = `x_kill() {
	xk=$1
	kill -9 -"$xk" 2>/dev/null
	for d in /proc/[0-9]*; do
		read -r s < "$d/stat" 2>/dev/null || continue
		s=${s##*) }
		s=${s#* * * }
		[ "${s%% *}" = "$xk" ] && kill -9 "${d#/proc/}" 2>/dev/null
	done
	return 0
}
`

// CancelScript returns the script that cancels the command of the exec
// pass whose directory is dir (dir/x its scratch, dir/out its results):
// it marks the pass cancelled and kills the command's tree (KillFunction)
// from the process group id the pass recorded; nothing to kill is success.
func CancelScript(dir string) string {
	return KillFunction + fmt.Sprintf(`X=%s/x; XO=%s/out; : > "$XO/cancelled" 2>/dev/null; p=$(cat "$X/pgid" 2>/dev/null) && x_kill "$p"; exit 0`, shQuote(dir), shQuote(dir))
}
