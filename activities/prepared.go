package activities

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RestorePreparedTree gives the workspace the prepared tree its setup
// would produce (docs/RUNTIMES.md "Prepared trees"), when this host keeps
// one for the workspace's scope, lockfiles (as the worktree holds them
// now: the result's LockfilesHash, which the save after the commands
// keys by), setup
// commands, prepared paths and runtime, and none of those paths is in the
// worktree yet. Files are reflinked, hard-linked (a root worker whose
// runtime isolates its commands: the links are read-only to them) or
// copied. It never fails for want of a tree: the result's Action is none
// with a note, and the setup commands run instead. Errors: the
// workspace's (ErrWorkspaceNotFound, ErrWorkspaceUnavailable).
func (a *Activities) RestorePreparedTree(ctx context.Context, in wire.PreparedTreeInput) (sandboxapi.PreparedTree, error) {
	return a.preparedTree(ctx, in, true)
}

// SavePreparedTree keeps the prepared paths of the workspace's worktree,
// as its successful setup left them, as the prepared tree of in's key
// (docs/RUNTIMES.md "Prepared trees"); a tree already kept stays. A tree
// that cannot be kept (too large, a full disk) is a result whose Action is
// none with a note: the setup succeeded all the same. Errors: the
// workspace's.
func (a *Activities) SavePreparedTree(ctx context.Context, in wire.PreparedTreeInput) (sandboxapi.PreparedTree, error) {
	return a.preparedTree(ctx, in, false)
}

func (a *Activities) preparedTree(ctx context.Context, in wire.PreparedTreeInput, restore bool) (sandboxapi.PreparedTree, error) {
	hash := in.LockfilesHash
	none := func(note string) (sandboxapi.PreparedTree, error) {
		return sandboxapi.PreparedTree{Action: sandboxapi.PreparedNone, Note: note, LockfilesHash: hash}, nil
	}
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.PreparedTree{}, err
	}
	env := a.repoEnvironment(ctx, ws)
	caps := a.Runtimes.Capabilities()
	switch {
	case env == nil || len(env.Prepared) == 0:
		return none("the repository names no prepared directory")
	case a.DepCaches == nil:
		return none("this worker keeps no dependency caches")
	case !caps.HostMounts:
		return none("the runtime holds a replica of the workspace: prepared trees are kept for runtimes on this host only")
	case ws.LocalPath == "":
		return none("the workspace has no worktree on this host")
	}
	// Under the workspace's exec lock: no command of another session
	// changes the directories meanwhile.
	unlock, err := a.lockExec(ctx, ws.ID)
	if err != nil {
		return sandboxapi.PreparedTree{}, err
	}
	defer unlock()
	// A restore keys by the lockfiles as they are now, before the
	// commands; the save after them by that same hash (in), whatever the
	// commands or the agent did to the lockfiles meanwhile.
	if restore {
		if cur := a.workspaceEnvironment(ctx, ws); cur != nil {
			hash = cur.LockfilesHash
		}
	}
	key := a.DepCaches.TreeKey(ws, hash, env.Setup, env.Prepared, a.Runtimes.Kind()+":"+a.runtimeImage(ctx, ws))
	root := os.Geteuid() == 0
	start := time.Now()
	res := sandboxapi.PreparedTree{Key: key, LockfilesHash: hash}
	var st depcache.PreparedStats
	if restore {
		uid, gid := -1, -1
		if fi, err := os.Stat(ws.LocalPath); err == nil {
			if s, ok := fi.Sys().(*syscall.Stat_t); ok && int(s.Uid) != os.Geteuid() {
				uid, gid = int(s.Uid), int(s.Gid)
			}
		}
		st, err = whileHeartbeating(ctx, func() (depcache.PreparedStats, error) {
			return a.DepCaches.RestoreTree(key, ws.LocalPath, env.Prepared, root && caps.Isolated, uid, gid)
		})
		res.Action = sandboxapi.PreparedRestored
	} else {
		st, err = whileHeartbeating(ctx, func() (depcache.PreparedStats, error) {
			return a.DepCaches.SaveTree(key, ws.LocalPath, env.Prepared, root)
		})
		res.Action = sandboxapi.PreparedSaved
	}
	switch {
	case errors.Is(err, depcache.ErrNoTree):
		return none("no prepared tree is kept for these lockfiles yet")
	case errors.Is(err, depcache.ErrPathExists):
		return none(sandboxapi.Message(err) + ": the setup runs instead")
	case err != nil:
		a.log().Warn("prepared tree", "workspace", ws.ID, "restore", restore, "error", sandboxapi.Message(err))
		return none(sandboxapi.Message(err))
	}
	if restore {
		a.changes.mark(ws.ID, a.now()) // the worktree changed
	} else if st.Files == 0 {
		return none("the setup left none of the prepared directories")
	}
	res.Mode, res.Files, res.Bytes = st.Mode, st.Files, st.Bytes
	res.DurationMS = time.Since(start).Milliseconds()
	return res, nil
}
