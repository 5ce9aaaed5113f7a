package bwrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
)

// DefaultDiskGB is a runtime's disk quota in GiB when ResourceHints.DiskGB
// is zero: what its worktree (and any other writable mount) and its /tmp
// may hold together, in allocated space, with at most
// diskquota.BytesPerFile bytes per entry (docs/SECURITY.md "Resource
// limits (bubblewrap)").
const DefaultDiskGB = 10

// diskDirs are the host directories a runtime's commands can write: the
// workdir, every other writable mount and the scratch /tmp.
func (cfg sandboxConfig) diskDirs() []string {
	dirs := []string{cfg.root, cfg.scratch}
	for _, m := range cfg.mounts {
		if m.rw && m.src != cfg.root {
			dirs = append(dirs, m.src)
		}
	}
	return dirs
}

// fileSizeArgs are the supervisor's flags limiting any one file a command
// writes to the disk quota (RLIMIT_FSIZE: the write fails with EFBIG, the
// writer gets SIGXFSZ), which the kernel enforces at once where the
// measurement (watchDiskLocked) only follows.
func (cfg sandboxConfig) fileSizeArgs() []string {
	if cfg.limits.DiskGB <= 0 {
		return nil
	}
	return []string{"--file-size-limit", strconv.FormatInt(cfg.limits.DiskGB<<30, 10)}
}

// watchDiskLocked starts measuring the runtime's disk use (r.mu held) when
// one of its sandboxes runs, it has a quota and nothing measures yet; the
// measurement stops with the last sandbox (unwatchDiskLocked). Commands
// only run while a sandbox does, so nothing grows unmeasured.
func (r *Runtime) watchDiskLocked(cfg sandboxConfig) {
	if r.diskStop != nil || len(r.sbs) == 0 || cfg.limits.DiskGB <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.diskStop = cancel
	w := &diskquota.Watcher{
		Dirs:     cfg.diskDirs,
		Limit:    diskquota.LimitOf(cfg.limits.DiskGB),
		Exceeded: r.overQuota,
		Log:      r.p.log.With("id", r.ID(), "workspace", cfg.workspaceID),
		Active:   r.commandsRun,
	}
	r.disk = w
	go w.Run(ctx)
}

// commandsRun reports whether a command or background process of the
// runtime runs (its commands' cgroup holds a process); true without a
// cgroup, where it cannot be known cheaply.
func (r *Runtime) commandsRun() bool {
	cg := r.p.cgroups.existing(r.ID())
	if cg == nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(cg.cmds, "cgroup.procs"))
	return err != nil || len(bytes.TrimSpace(b)) > 0
}

// unwatchDiskLocked stops the measurement when no sandbox runs (r.mu held).
func (r *Runtime) unwatchDiskLocked() {
	if len(r.sbs) == 0 && r.diskStop != nil {
		r.diskStop()
		r.diskStop = nil
	}
}

// overQuota is the watcher's Exceeded: the runtime's use is over its quota
// and grew, so every command and background process of the runtime is
// killed (exit 137; Exec adds a notice, see quotaNotice) — through the
// commands' cgroup when there is one, else by ending the sandboxes (their
// processes archived as for Stop). The files stay: nothing is deleted, and
// commands that remove files may run again at once.
func (r *Runtime) overQuota(u diskquota.Usage) {
	r.diskKills.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	var cg *cgroup
	for _, sb := range r.sbs {
		if sb.cg != nil {
			cg = sb.cg
		}
	}
	if cg == nil && len(r.sbs) > 0 {
		cg = r.p.cgroups.existing(r.ID())
	}
	if cg != nil {
		cg.killCommands()
		return
	}
	for m, sb := range r.sbs {
		r.p.shutdown(context.Background(), r.ID(), m, sb, r.archive)
		delete(r.sbs, m)
	}
	r.unwatchDiskLocked()
}

// quotaNotice is what a command killed by the disk quota gets on stderr.
func (r *Runtime) quotaNotice(cfg sandboxConfig) []byte {
	r.mu.Lock()
	w := r.disk
	r.mu.Unlock()
	u := diskquota.Usage{}
	if w != nil {
		u = w.Last()
	}
	return []byte("\nsandbox: killed: the runtime's disk quota was exceeded (" + u.Describe(diskquota.LimitOf(cfg.limits.DiskGB)) +
		" in the worktree and /tmp); remove files, or raise the quota (SANDBOX_RUNTIME_DISK_GB)\n")
}

// fileSizeNotice is what a command the file size limit killed (SIGXFSZ,
// exit 153) gets on stderr.
func fileSizeNotice(cfg sandboxConfig) []byte {
	return []byte("\nsandbox: killed: a file reached the largest size the runtime's disk quota allows (" +
		strconv.FormatInt(cfg.limits.DiskGB, 10) + " GiB; SANDBOX_RUNTIME_DISK_GB)\n")
}
