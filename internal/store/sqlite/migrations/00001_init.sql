-- Schema of docs/DESIGN.md "Storage model": sandbox_repo_caches, sandbox_workspaces,
-- sandbox_runtimes. Times are TEXT in the fixed-width UTC form
-- YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ (sorts like the instants it names); booleans
-- are INTEGER 0/1. There are no foreign keys: a workspace row outlives its
-- runtimes (docs/DESIGN.md "Rules") and
-- the eviction planner, not the schema, decides when a cache may go.

-- +goose Up
CREATE TABLE sandbox_repo_caches (
    id              TEXT    NOT NULL PRIMARY KEY,
    repo_name       TEXT    NOT NULL,
    repo_url        TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    provider_host   TEXT    NOT NULL,
    local_path      TEXT    NOT NULL,
    auth_scope_hash TEXT    NOT NULL,
    default_branch  TEXT    NOT NULL,
    host_id         TEXT    NOT NULL,
    last_fetched_at TEXT    NOT NULL,
    last_used_at    TEXT    NOT NULL,
    size_bytes      INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
) STRICT;

CREATE INDEX sandbox_repo_caches_state_last_used ON sandbox_repo_caches (state, last_used_at);
CREATE INDEX sandbox_repo_caches_last_used ON sandbox_repo_caches (last_used_at, id);
CREATE INDEX sandbox_repo_caches_host ON sandbox_repo_caches (host_id);

CREATE TABLE sandbox_workspaces (
    id              TEXT    NOT NULL PRIMARY KEY,
    key             TEXT    NOT NULL,
    repo_cache_id   TEXT    NOT NULL,
    repo_host       TEXT    NOT NULL,
    repo_owner      TEXT    NOT NULL,
    repo_name       TEXT    NOT NULL,
    repo_url        TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    user_id         TEXT    NOT NULL,
    mode            TEXT    NOT NULL,
    conversation_id TEXT,
    task_id         TEXT,
    base_ref        TEXT    NOT NULL,
    base_commit     TEXT    NOT NULL,
    branch_name     TEXT    NOT NULL,
    local_path      TEXT    NOT NULL,
    host_id         TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    dirty           INTEGER NOT NULL,
    pinned_until    TEXT,
    cap_writable    INTEGER NOT NULL,
    cap_isolated    INTEGER NOT NULL,
    cap_persistent  INTEGER NOT NULL,
    last_used_at    TEXT    NOT NULL,
    size_bytes      INTEGER NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
) STRICT;

-- Uniqueness (docs/DESIGN.md "Storage model", suggested uniqueness), one partial index per mode.
CREATE UNIQUE INDEX sandbox_workspaces_key ON sandbox_workspaces (key);
CREATE UNIQUE INDEX sandbox_workspaces_analysis_uq ON sandbox_workspaces (user_id, project_id, base_ref, mode)
    WHERE mode = 'analysis';
CREATE UNIQUE INDEX sandbox_workspaces_edit_uq ON sandbox_workspaces (user_id, project_id, conversation_id)
    WHERE mode = 'edit';
CREATE UNIQUE INDEX sandbox_workspaces_task_uq ON sandbox_workspaces (user_id, project_id, task_id)
    WHERE mode = 'task';

-- Eviction and listing queries.
CREATE INDEX sandbox_workspaces_state_last_used ON sandbox_workspaces (state, last_used_at);
CREATE INDEX sandbox_workspaces_last_used ON sandbox_workspaces (last_used_at, id);
CREATE INDEX sandbox_workspaces_size ON sandbox_workspaces (size_bytes);
CREATE INDEX sandbox_workspaces_repo_cache ON sandbox_workspaces (repo_cache_id);
CREATE INDEX sandbox_workspaces_host ON sandbox_workspaces (host_id);

CREATE TABLE sandbox_runtimes (
    id                 TEXT NOT NULL PRIMARY KEY,
    workspace_id       TEXT NOT NULL,
    backend_kind       TEXT NOT NULL,
    backend_runtime_id TEXT NOT NULL,
    image              TEXT NOT NULL,
    state              TEXT NOT NULL,
    last_started_at    TEXT,
    last_used_at       TEXT NOT NULL,
    expires_at         TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
) STRICT;

CREATE INDEX sandbox_runtimes_workspace ON sandbox_runtimes (workspace_id);
CREATE INDEX sandbox_runtimes_state_last_used ON sandbox_runtimes (state, last_used_at);

-- +goose Down
DROP TABLE sandbox_runtimes;
DROP TABLE sandbox_workspaces;
DROP TABLE sandbox_repo_caches;
