package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// ---- repo caches (seed "Storage Model: sandbox_repo_caches") ----

const repoCacheColumns = `id, repo_name, repo_url, provider, provider_host, local_path,
	auth_scope_hash, default_branch, host_id, last_fetched_at, last_used_at, size_bytes,
	state, created_at, updated_at`

// UpsertRepoCache inserts c (seed "Storage Model: sandbox_repo_caches"), or
// replaces every column of the row with c.ID except created_at, which keeps its
// first value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	if err := requireID("repo cache", c.ID); err != nil {
		return err
	}
	var cd codec
	args := []any{
		c.ID, c.RepoName, c.RepoURL, c.Provider, c.ProviderHost, c.LocalPath,
		c.AuthScopeHash, c.DefaultBranch, c.HostID,
		cd.t("last_fetched_at", c.LastFetchedAt), cd.t("last_used_at", c.LastUsedAt),
		c.SizeBytes, string(c.State),
		cd.t("created_at", c.CreatedAt), cd.t("updated_at", c.UpdatedAt),
	}
	if cd.err != nil {
		return cd.err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sandbox_repo_caches (`+repoCacheColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (id) DO UPDATE SET
			repo_name = excluded.repo_name,
			repo_url = excluded.repo_url,
			provider = excluded.provider,
			provider_host = excluded.provider_host,
			local_path = excluded.local_path,
			auth_scope_hash = excluded.auth_scope_hash,
			default_branch = excluded.default_branch,
			host_id = excluded.host_id,
			last_fetched_at = excluded.last_fetched_at,
			last_used_at = excluded.last_used_at,
			size_bytes = excluded.size_bytes,
			state = excluded.state,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		return mapWriteErr(err, fmt.Sprintf("repo cache %q", c.ID), "upsert")
	}
	return nil
}

func scanRepoCache(row pgx.Row) (sandbox.RepoCache, error) {
	var (
		c                                           sandbox.RepoCache
		state                                       string
		lastFetched, lastUsed, createdAt, updatedAt string
	)
	err := row.Scan(&c.ID, &c.RepoName, &c.RepoURL, &c.Provider, &c.ProviderHost, &c.LocalPath,
		&c.AuthScopeHash, &c.DefaultBranch, &c.HostID, &lastFetched, &lastUsed, &c.SizeBytes,
		&state, &createdAt, &updatedAt)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	var cd codec
	c.State = sandbox.RepoCacheState(state)
	c.LastFetchedAt = cd.dt("last_fetched_at", lastFetched)
	c.LastUsedAt = cd.dt("last_used_at", lastUsed)
	c.CreatedAt = cd.dt("created_at", createdAt)
	c.UpdatedAt = cd.dt("updated_at", updatedAt)
	return c, cd.err
}

// GetRepoCache returns the repo cache with id (seed "Storage Model:
// sandbox_repo_caches"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	c, err := scanRepoCache(s.pool.QueryRow(ctx,
		`SELECT `+repoCacheColumns+` FROM sandbox_repo_caches WHERE id = $1`, id))
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
	rows, err := s.pool.Query(ctx,
		`SELECT `+repoCacheColumns+` FROM sandbox_repo_caches ORDER BY last_used_at, id`)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list repo caches: %w", err)
	}
	out, err := collect(rows, scanRepoCache)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list repo caches: %w", err)
	}
	return out, nil
}

// DeleteRepoCache deletes the repo cache row with id (seed "Storage Model:
// sandbox_repo_caches") (not its files, and not the workspaces that reference
// it). A missing row is success.
func (s *Store) DeleteRepoCache(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sandbox_repo_caches WHERE id = $1`, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("repo cache %q", id), "delete")
	}
	return nil
}

// ---- workspaces (seed "Storage Model: sandbox_workspaces") ----

const workspaceColumns = `id, key, repo_cache_id, repo_host, repo_owner, repo_name, repo_url,
	project_id, user_id, mode, conversation_id, task_id, base_ref, base_commit, branch_name,
	local_path, host_id, state, dirty, pinned_until, cap_writable, cap_isolated, cap_persistent,
	last_used_at, size_bytes, created_at, updated_at`

// workspaceArgs returns ws's column values in workspaceColumns order.
func workspaceArgs(ws sandbox.Workspace) ([]any, error) {
	var cd codec
	args := []any{
		ws.ID, ws.Key, ws.RepoCacheID, ws.Repo.Host, ws.Repo.Owner, ws.Repo.Name, ws.Repo.URL,
		ws.ProjectID, ws.UserID, string(ws.Mode), nullIfEmpty(ws.ConversationID), nullIfEmpty(ws.TaskID),
		ws.BaseRef, ws.BaseCommit, ws.BranchName, ws.LocalPath, ws.HostID, string(ws.State),
		ws.Dirty, cd.p("pinned_until", ws.PinnedUntil),
		ws.Capabilities.Writable, ws.Capabilities.Isolated, ws.Capabilities.Persistent,
		cd.t("last_used_at", ws.LastUsedAt), ws.SizeBytes,
		cd.t("created_at", ws.CreatedAt), cd.t("updated_at", ws.UpdatedAt),
	}
	return args, cd.err
}

func scanWorkspace(row pgx.Row) (sandbox.Workspace, error) {
	var (
		ws                                  sandbox.Workspace
		mode, state                         string
		conversationID, taskID, pinnedUntil *string
		lastUsed, createdAt, updatedAt      string
	)
	err := row.Scan(&ws.ID, &ws.Key, &ws.RepoCacheID, &ws.Repo.Host, &ws.Repo.Owner, &ws.Repo.Name, &ws.Repo.URL,
		&ws.ProjectID, &ws.UserID, &mode, &conversationID, &taskID, &ws.BaseRef, &ws.BaseCommit, &ws.BranchName,
		&ws.LocalPath, &ws.HostID, &state, &ws.Dirty, &pinnedUntil,
		&ws.Capabilities.Writable, &ws.Capabilities.Isolated, &ws.Capabilities.Persistent,
		&lastUsed, &ws.SizeBytes, &createdAt, &updatedAt)
	if err != nil {
		return sandbox.Workspace{}, err
	}
	var cd codec
	ws.Mode = sandbox.WorkspaceMode(mode)
	ws.State = sandbox.WorkspaceState(state)
	ws.ConversationID = deref(conversationID)
	ws.TaskID = deref(taskID)
	ws.PinnedUntil = cd.dp("pinned_until", pinnedUntil)
	ws.LastUsedAt = cd.dt("last_used_at", lastUsed)
	ws.CreatedAt = cd.dt("created_at", createdAt)
	ws.UpdatedAt = cd.dt("updated_at", updatedAt)
	return ws, cd.err
}

// CreateWorkspace inserts ws (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrConflict when a row with ws.ID or ws.Key exists, or one
// with the same uniqueness key of ws.Mode (analysis: user_id, project_id,
// base_ref; edit: user_id, project_id, conversation_id; task: user_id,
// project_id, task_id — seed "Storage Model", suggested uniqueness), also
// when the other row is being inserted concurrently by another worker;
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) CreateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	if err := requireID("workspace", ws.ID); err != nil {
		return err
	}
	args, err := workspaceArgs(ws)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sandbox_workspaces (`+workspaceColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
			$19, $20, $21, $22, $23, $24, $25, $26, $27)`, args...)
	if err != nil {
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
	args, err := workspaceArgs(ws)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE sandbox_workspaces SET
		key = $2, repo_cache_id = $3, repo_host = $4, repo_owner = $5, repo_name = $6, repo_url = $7,
		project_id = $8, user_id = $9, mode = $10, conversation_id = $11, task_id = $12, base_ref = $13,
		base_commit = $14, branch_name = $15, local_path = $16, host_id = $17, state = $18, dirty = $19,
		pinned_until = $20, cap_writable = $21, cap_isolated = $22, cap_persistent = $23,
		last_used_at = $24, size_bytes = $25, created_at = $26, updated_at = $27
		WHERE id = $1`, args...)
	if err != nil {
		return mapWriteErr(err, fmt.Sprintf("workspace %q (key %q)", ws.ID, ws.Key), "update")
	}
	if tag.RowsAffected() == 0 {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", ws.ID)
	}
	return nil
}

// GetWorkspace returns the workspace with id (seed "Storage Model:
// sandbox_workspaces"). Errors: sandbox.ErrWorkspaceNotFound (message naming
// id) when there is none.
func (s *Store) GetWorkspace(ctx context.Context, id string) (sandbox.Workspace, error) {
	ws, err := scanWorkspace(s.pool.QueryRow(ctx,
		`SELECT `+workspaceColumns+` FROM sandbox_workspaces WHERE id = $1`, id))
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
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	for _, eq := range []struct{ col, v string }{
		{"user_id", f.UserID}, {"project_id", f.ProjectID}, {"repo_cache_id", f.RepoCacheID},
		{"host_id", f.HostID}, {"mode", string(f.Mode)}, {"state", string(f.State)},
	} {
		if eq.v != "" {
			add(eq.col+" = $%d", eq.v)
		}
	}
	if !f.LastUsedBefore.IsZero() {
		before, err := encodeTime("last_used_before", f.LastUsedBefore)
		if err != nil {
			return nil, err
		}
		add("last_used_at < $%d", before)
	}
	q := `SELECT ` + workspaceColumns + ` FROM sandbox_workspaces`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY last_used_at, id`
	if f.Limit > 0 {
		args = append(args, int64(f.Limit))
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapReadErr(err, "workspaces", "list")
	}
	out, err := collect(rows, scanWorkspace)
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
	t, err := encodeTime("last_used_at", at)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx,
		`UPDATE sandbox_workspaces SET last_used_at = $1, updated_at = $1 WHERE id = $2`, t, id)
	if err != nil {
		return mapReadErr(err, fmt.Sprintf("workspace %q", id), "touch")
	}
	if tag.RowsAffected() == 0 {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	return nil
}

// DeleteWorkspace deletes the workspace row with id (seed "Storage Model:
// sandbox_workspaces") (not its files, and not its runtime rows). A missing row
// is success.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sandbox_workspaces WHERE id = $1`, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("workspace %q", id), "delete")
	}
	return nil
}

// ---- runtimes (seed "Storage Model: sandbox_runtimes") ----

const runtimeColumns = `id, workspace_id, backend_kind, backend_runtime_id, image, state,
	last_started_at, last_used_at, expires_at, created_at, updated_at`

// UpsertRuntime inserts r (seed "Storage Model: sandbox_runtimes"), or replaces
// every column of the row with r.ID except created_at, which keeps its first
// value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string PostgreSQL cannot store.
func (s *Store) UpsertRuntime(ctx context.Context, r sandbox.RuntimeRecord) error {
	if err := requireID("runtime", r.ID); err != nil {
		return err
	}
	var cd codec
	args := []any{
		r.ID, r.WorkspaceID, r.BackendKind, r.BackendRuntimeID, r.Image, string(r.State),
		cd.p("last_started_at", r.LastStartedAt), cd.t("last_used_at", r.LastUsedAt),
		cd.p("expires_at", r.ExpiresAt), cd.t("created_at", r.CreatedAt), cd.t("updated_at", r.UpdatedAt),
	}
	if cd.err != nil {
		return cd.err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sandbox_runtimes (`+runtimeColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (id) DO UPDATE SET
			workspace_id = excluded.workspace_id,
			backend_kind = excluded.backend_kind,
			backend_runtime_id = excluded.backend_runtime_id,
			image = excluded.image,
			state = excluded.state,
			last_started_at = excluded.last_started_at,
			last_used_at = excluded.last_used_at,
			expires_at = excluded.expires_at,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		return mapWriteErr(err, fmt.Sprintf("runtime %q", r.ID), "upsert")
	}
	return nil
}

func scanRuntime(row pgx.Row) (sandbox.RuntimeRecord, error) {
	var (
		r                              sandbox.RuntimeRecord
		state                          string
		lastStarted, expires           *string
		lastUsed, createdAt, updatedAt string
	)
	err := row.Scan(&r.ID, &r.WorkspaceID, &r.BackendKind, &r.BackendRuntimeID, &r.Image, &state,
		&lastStarted, &lastUsed, &expires, &createdAt, &updatedAt)
	if err != nil {
		return sandbox.RuntimeRecord{}, err
	}
	var cd codec
	r.State = sandbox.RuntimeState(state)
	r.LastStartedAt = cd.dp("last_started_at", lastStarted)
	r.LastUsedAt = cd.dt("last_used_at", lastUsed)
	r.ExpiresAt = cd.dp("expires_at", expires)
	r.CreatedAt = cd.dt("created_at", createdAt)
	r.UpdatedAt = cd.dt("updated_at", updatedAt)
	return r, cd.err
}

// GetRuntime returns the runtime record with id (seed "Storage Model:
// sandbox_runtimes"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRuntime(ctx context.Context, id string) (sandbox.RuntimeRecord, error) {
	r, err := scanRuntime(s.pool.QueryRow(ctx,
		`SELECT `+runtimeColumns+` FROM sandbox_runtimes WHERE id = $1`, id))
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
	q := `SELECT ` + runtimeColumns + ` FROM sandbox_runtimes`
	var args []any
	if workspaceID != "" {
		q += ` WHERE workspace_id = $1`
		args = append(args, workspaceID)
	}
	q += ` ORDER BY last_used_at, id`
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapReadErr(err, "runtimes", "list")
	}
	out, err := collect(rows, scanRuntime)
	if err != nil {
		return nil, mapReadErr(err, "runtimes", "list")
	}
	return out, nil
}

// DeleteRuntime deletes the runtime record with id (seed "Storage Model:
// sandbox_runtimes") (never the workspace: "Workspace records should survive
// runtime destruction"). A missing row is success.
func (s *Store) DeleteRuntime(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sandbox_runtimes WHERE id = $1`, id); err != nil {
		return mapReadErr(err, fmt.Sprintf("runtime %q", id), "delete")
	}
	return nil
}
