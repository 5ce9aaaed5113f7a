package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
)

// ---- repo caches (seed "Storage Model: sandbox_repo_caches") ----

// UpsertRepoCache inserts c (seed "Storage Model: sandbox_repo_caches"), or
// replaces every column of the row with c.ID except created_at, which keeps its
// first value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	args, err := store.RepoCacheValues(c)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, statements.UpsertRepoCache, args...); err != nil {
		return mapWriteErr(err, fmt.Sprintf("repo cache %q", c.ID), "upsert")
	}
	return nil
}

// GetRepoCache returns the repo cache with id (seed "Storage Model:
// sandbox_repo_caches"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	c, err := store.ScanRepoCache(s.pool.QueryRow(ctx, statements.GetRepoCache, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sandbox.RepoCache{}, sandbox.Errorf(sandbox.ErrNotFound, "repo cache %q not found", id)
	}
	if err != nil {
		return sandbox.RepoCache{}, mapReadErr(err, fmt.Sprintf("repo cache %q", id), "get")
	}
	return c, nil
}

// ListRepoCaches returns every repo cache (seed "Storage Model:
// sandbox_repo_caches"), least recently used first (last_used_at ascending,
// then id), as a non-nil slice.
func (s *Store) ListRepoCaches(ctx context.Context) ([]sandbox.RepoCache, error) {
	out, err := list(ctx, s, statements.ListRepoCaches, nil, store.ScanRepoCache)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list repo caches: %w", err)
	}
	return out, nil
}

// DeleteRepoCache deletes the repo cache row with id (seed "Storage Model:
// sandbox_repo_caches") (not its files, and not the workspaces that reference
// it). A missing row is success.
func (s *Store) DeleteRepoCache(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, statements.DeleteRepoCache, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("repo cache %q", id), "delete")
	}
	return nil
}

// ---- workspaces (seed "Storage Model: sandbox_workspaces") ----

// CreateWorkspace inserts ws (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrConflict when a row with ws.ID or ws.Key exists, or one
// with the same uniqueness key of ws.Mode (analysis: user_id, project_id,
// base_ref; edit: user_id, project_id, conversation_id; task: user_id,
// project_id, task_id — seed "Storage Model", suggested uniqueness), also
// when the other row is being inserted concurrently by another worker;
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) CreateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	args, err := store.WorkspaceValues(ws)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, statements.CreateWorkspace, args...); err != nil {
		if pgCode(err) == sqlstateUniqueViolation {
			return sandbox.Errorf(sandbox.ErrConflict, "workspace %q (key %q) already exists: %v", ws.ID, ws.Key, err)
		}
		return mapWriteErr(err, fmt.Sprintf("workspace %q", ws.ID), "create")
	}
	return nil
}

// UpdateWorkspace replaces every column of the row with ws.ID (created_at
// included) with ws's values (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrWorkspaceNotFound when there is no such row;
// sandbox.ErrConflict when the new values collide with another row's key or
// mode uniqueness key; sandbox.ErrInvalidArgument for an unrepresentable time
// or a string PostgreSQL cannot store.
func (s *Store) UpdateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	args, err := store.WorkspaceUpdateValues(ws)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, statements.UpdateWorkspace, args...)
	if err != nil {
		return mapWriteErr(err, fmt.Sprintf("workspace %q (key %q)", ws.ID, ws.Key), "update")
	}
	return affectedOrNotFound(tag.RowsAffected(), ws.ID)
}

// affectedOrNotFound is sandbox.ErrWorkspaceNotFound when a workspace
// statement changed no row.
func affectedOrNotFound(n int64, id string) error {
	if n == 0 {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	return nil
}

// GetWorkspace returns the workspace with id (seed "Storage Model:
// sandbox_workspaces"). Errors: sandbox.ErrWorkspaceNotFound (message naming
// id) when there is none.
func (s *Store) GetWorkspace(ctx context.Context, id string) (sandbox.Workspace, error) {
	ws, err := store.ScanWorkspace(s.pool.QueryRow(ctx, statements.GetWorkspace, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sandbox.Workspace{}, sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	if err != nil {
		return sandbox.Workspace{}, mapReadErr(err, fmt.Sprintf("workspace %q", id), "get")
	}
	return ws, nil
}

// ListWorkspaces (seed "Storage Model: sandbox_workspaces") returns the
// workspaces matching every non-zero field of f (equality on UserID, ProjectID,
// RepoCacheID, HostID, Mode, State; last_used_at strictly before
// LastUsedBefore), least recently used first (last_used_at ascending, then id),
// at most f.Limit rows when f.Limit > 0, as a non-nil slice. Errors:
// sandbox.ErrInvalidArgument for an unrepresentable LastUsedBefore.
func (s *Store) ListWorkspaces(ctx context.Context, f sandbox.WorkspaceFilter) ([]sandbox.Workspace, error) {
	q, args, err := statements.ListWorkspaces(f)
	if err != nil {
		return nil, err
	}
	out, err := list(ctx, s, q, args, store.ScanWorkspace)
	if err != nil {
		return nil, mapReadErr(err, "workspaces", "list")
	}
	return out, nil
}

// TouchWorkspace sets last_used_at and updated_at of the workspace with id to
// at (seed "Storage Model: sandbox_workspaces") (stored in UTC; not clamped, so
// an earlier at moves them back). Errors: sandbox.ErrWorkspaceNotFound when
// there is no such row; sandbox.ErrInvalidArgument for an unrepresentable at.
func (s *Store) TouchWorkspace(ctx context.Context, id string, at time.Time) error {
	t, err := store.EncodeTime("last_used_at", at)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, statements.TouchWorkspace, t, t, id)
	if err != nil {
		return mapReadErr(err, fmt.Sprintf("workspace %q", id), "touch")
	}
	return affectedOrNotFound(tag.RowsAffected(), id)
}

// DeleteWorkspace deletes the workspace row with id (seed "Storage Model:
// sandbox_workspaces") (not its files, and not its runtime rows). A missing row
// is success.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, statements.DeleteWorkspace, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("workspace %q", id), "delete")
	}
	return nil
}

// ---- runtimes (seed "Storage Model: sandbox_runtimes") ----

// UpsertRuntime inserts r (seed "Storage Model: sandbox_runtimes"), or replaces
// every column of the row with r.ID except created_at, which keeps its first
// value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) UpsertRuntime(ctx context.Context, r sandbox.RuntimeRecord) error {
	args, err := store.RuntimeValues(r)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, statements.UpsertRuntime, args...); err != nil {
		return mapWriteErr(err, fmt.Sprintf("runtime %q", r.ID), "upsert")
	}
	return nil
}

// GetRuntime returns the runtime record with id (seed "Storage Model:
// sandbox_runtimes"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRuntime(ctx context.Context, id string) (sandbox.RuntimeRecord, error) {
	r, err := store.ScanRuntime(s.pool.QueryRow(ctx, statements.GetRuntime, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sandbox.RuntimeRecord{}, sandbox.Errorf(sandbox.ErrNotFound, "runtime %q not found", id)
	}
	if err != nil {
		return sandbox.RuntimeRecord{}, mapReadErr(err, fmt.Sprintf("runtime %q", id), "get")
	}
	return r, nil
}

// ListRuntimes (seed "Storage Model: sandbox_runtimes") returns the runtime
// records of workspaceID, or every record when workspaceID is "", least
// recently used first (last_used_at ascending, then id), as a non-nil slice.
func (s *Store) ListRuntimes(ctx context.Context, workspaceID string) ([]sandbox.RuntimeRecord, error) {
	q, args := statements.ListRuntimes(workspaceID)
	out, err := list(ctx, s, q, args, store.ScanRuntime)
	if err != nil {
		return nil, mapReadErr(err, "runtimes", "list")
	}
	return out, nil
}

// DeleteRuntime deletes the runtime record with id (seed "Storage Model:
// sandbox_runtimes") (never the workspace: "Workspace records should survive
// runtime destruction"). A missing row is success.
func (s *Store) DeleteRuntime(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, statements.DeleteRuntime, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("runtime %q", id), "delete")
	}
	return nil
}

// list runs query q with args and reads every row with scan into a non-nil
// slice; the error is pgx's, unmapped, from the query or from reading.
func list[T any](ctx context.Context, s *Store, q string, args []any, scan func(store.Row) (T, error)) ([]T, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, scan)
}
