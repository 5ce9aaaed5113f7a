package bwrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DefaultDiskGB is a runtime's disk quota in GiB when ResourceHints.DiskGB
// is zero: what its worktree (and any other writable mount) and its /tmp
// may hold together, in allocated space, with at most
// diskquota.BytesPerFile bytes per entry (docs/SECURITY.md "Resource
// limits (bubblewrap)").
const DefaultDiskGB = 10

// ShmBytes is the size of a sandbox's /dev/shm, a tmpfs that the disk
// quota does not measure: 64 MiB, Docker's default (docs/SECURITY.md
// "Resource limits (bubblewrap)").
const ShmBytes = 64 << 20

// diskDirs are the host directories a runtime's commands can write: the
// workdir, every other writable mount and the scratch /tmp.
func (cfg sandboxConfig) diskDirs() []string {
	dirs := []string{cfg.root, cfg.scratch}
	for _, m := range cfg.mounts {
		if m.rw && !m.shared && m.src != cfg.root {
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
	if r.diskStop != nil || len(r.sbs) == 0 {
		return
	}
	w := r.diskWatcherLocked(cfg)
	if w == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.diskStop = cancel
	go w.Run(ctx)
	r.p.shared.join(r, cfg)
}

// diskWatcherLocked returns the runtime's disk watcher for cfg's quota
// (r.mu held), made at first use and again when the quota changed; nil
// without a quota.
func (r *Runtime) diskWatcherLocked(cfg sandboxConfig) *diskquota.Watcher {
	if cfg.limits.DiskGB <= 0 {
		return nil
	}
	limit := diskquota.LimitOf(cfg.limits.DiskGB)
	if r.disk != nil && r.disk.Limit == limit {
		return r.disk
	}
	if r.diskStop != nil {
		r.diskStop()
		r.diskStop = nil
	}
	r.disk = &diskquota.Watcher{
		Dirs:     func() []string { return r.life.Conf().diskDirs() },
		Limit:    limit,
		Exceeded: r.overQuota,
		Log:      r.p.log.With("id", r.ID(), "workspace", cfg.workspaceID),
		Active:   r.commandsRun,
	}
	if r.p.diskReserve >= 0 {
		// A volume's own free space is its quota's business; the host's
		// is judged where its image lives.
		r.disk.Reserve = diskquota.FreeReserve(r.p.diskReserve, r.p.volumes.HostDir(cfg.root), r.p.volumes.HostDir(cfg.scratch))
	}
	return r.disk
}

// fileGrowthBlocked reports whether a command starting now must start
// unable to grow files (supervisor.Spec.NoFileGrowth): the runtime is over
// its quota or its use cannot be measured (diskquota.Watcher.Blocked).
// It measures first when the runtime is near its quota; ctx bounds that.
func (r *Runtime) fileGrowthBlocked(ctx context.Context, cfg sandboxConfig) bool {
	r.mu.Lock()
	w := r.diskWatcherLocked(cfg)
	r.mu.Unlock()
	if w == nil {
		return false
	}
	own := w.Blocked(ctx)
	return r.p.shared.blocked(ctx, r) || own
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
		r.p.shared.leave(r)
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
	return []byte("\nsandbox: killed: the runtime's disk quota was exceeded (" + r.diskUse(cfg) +
		"); remove files, or raise the quota (SANDBOX_RUNTIME_DISK_GB)\n")
}

// blockedNotice is what a command started while the runtime was over its
// quota (supervisor.Spec.NoFileGrowth) gets on stderr.
func (r *Runtime) blockedNotice(cfg sandboxConfig) []byte {
	return []byte("\nsandbox: the runtime is over its disk quota (" + r.diskUse(cfg) +
		"): this command could not make any file larger; remove files (rm works), or raise the quota (SANDBOX_RUNTIME_DISK_GB)\n")
}

// diskUse describes the runtime's last measurement against its quota, or
// why it could not be measured.
func (r *Runtime) diskUse(cfg sandboxConfig) string {
	r.mu.Lock()
	w := r.disk
	r.mu.Unlock()
	limit := diskquota.LimitOf(cfg.limits.DiskGB)
	var used diskquota.Usage
	var failure error
	if w != nil {
		used, failure = w.Last(), w.Failure()
	}
	parts := []string{used.Describe(limit) + " in the worktree and /tmp"}
	if failure != nil {
		parts[0] = "its use cannot be measured, which counts as over the quota: " + sandboxView(cfg, failure.Error())
	}
	for _, sq := range r.p.shared.of(r) {
		if err := sq.w.Failure(); err != nil {
			parts = append(parts, "the dependency cache, which other workspaces share, cannot be measured: "+sandboxView(cfg, err.Error()))
		} else if u := sq.w.Last(); u.Over(sq.w.Limit) {
			parts = append(parts, "the dependency cache, which other workspaces share, holds "+u.Describe(sq.w.Limit))
		}
	}
	return strings.Join(parts, "; ")
}

// fileSizeNotice is what a command the file size limit killed (SIGXFSZ,
// exit 153) gets on stderr.
func fileSizeNotice(cfg sandboxConfig) []byte {
	return []byte("\nsandbox: killed: a file reached the largest size the runtime's disk quota allows (" +
		strconv.FormatInt(cfg.limits.DiskGB, 10) + " GiB; SANDBOX_RUNTIME_DISK_GB)\n")
}

// sandboxView is msg (a measurement's error) as a command sees the paths
// in it — the host's worktree and scratch directories replaced by their
// places in the sandbox — clipped to 400 bytes of valid UTF-8.
func sandboxView(cfg sandboxConfig, msg string) string {
	msg = strings.ReplaceAll(msg, cfg.root, cfg.workdir)
	msg = strings.ReplaceAll(msg, cfg.scratch, "/tmp")
	if len(msg) > 400 {
		msg = msg[:400] + "…"
	}
	return strings.ToValidUTF8(msg, "?")
}

// execNote is what a command's notice compares against, taken as it
// starts: when, the memory limit's and the disk quota's kill counts,
// whether it started unable to grow files (and the notice saying why, as
// the quota stood then), and whether its network goes through the egress
// proxy.
type execNote struct {
	since     time.Time
	oom, disk int64
	blocked   []byte // blockedNotice at the start; nil: not blocked
	egress    bool
}

// startNote is the execNote of a command of network mode starting now.
func (r *Runtime) startNote(cfg sandboxConfig, mode sandboxapi.Network, blocked bool) execNote {
	n := execNote{since: time.Now(), oom: r.p.cgroups.existing(r.ID()).oomKills(), disk: r.diskKills.Load(),
		egress: r.p.egress != nil && cfg.egressDirOf(mode) != ""}
	if blocked {
		// What blocked it: by its end an rm may have brought the runtime
		// back under the quota.
		n.blocked = r.blockedNotice(cfg)
	}
	return n
}

// endNotice is what a command started as n and ended with exit code code
// (-1: unknown) gets at the end of its stderr: why the runtime killed it
// or kept it from writing, and what the network policy refused while it
// ran; "" when nothing.
func (r *Runtime) endNotice(cfg sandboxConfig, n execNote, code int) string {
	var b strings.Builder
	switch {
	case code == 137 && r.p.cgroups.existing(r.ID()).oomKills() > n.oom:
		b.WriteString("\nsandbox: killed: the runtime's memory limit was reached\n")
	case code == 137 && r.diskKills.Load() > n.disk:
		b.Write(r.quotaNotice(cfg))
	case n.blocked != nil:
		b.Write(n.blocked)
	case code == 128+int(syscall.SIGXFSZ) && cfg.limits.DiskGB > 0:
		b.Write(fileSizeNotice(cfg))
	}
	if n.egress {
		b.WriteString(r.p.egress.RefusalNotice(cfg.workspaceID, n.since))
	}
	return b.String()
}

// ExecNotice is sandbox.ExecNotices: endNotice for an exec process this
// runtime started (prepare recorded it).
func (r *Runtime) ExecNotice(id string, info sandboxapi.ProcessInfo) string {
	n, ok := r.notes.Get(id)
	if !ok {
		return ""
	}
	return r.endNotice(r.life.Conf(), n, info.ExitCode)
}
