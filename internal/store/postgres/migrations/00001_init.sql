-- Schema of docs/DESIGN.md "Storage model": sandbox_repo_caches, sandbox_workspaces,
-- sandbox_runtimes — the same tables and columns as the embedded SQLite store
-- (internal/store/sqlite/migrations/00001_init.sql).
--
-- Conventions, chosen so both stores behave the same:
--   * Times are TEXT in the fixed-width UTC form YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ.
--     timestamptz keeps only microseconds; this keeps nanoseconds, represents
--     the zero time.Time (year 1), and sorts as the instants it names.
--   * Every TEXT column uses COLLATE "C" (byte order), like SQLite's BINARY, so
--     "ORDER BY last_used_at, id" and the unique keys do not depend on the
--     database's locale.
--   * Empty conversation_id / task_id and absent optional times are NULL, so the
--     per-mode partial unique indexes ignore them.
--   * No foreign keys: a workspace row outlives its runtimes (docs/DESIGN.md
--     "Rules": workspace records survive runtime destruction) and the eviction planner,
--     not the schema, decides when a cache may go.

-- +goose Up
CREATE TABLE sandbox_repo_caches (
    id              TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    repo_name       TEXT COLLATE "C" NOT NULL,
    repo_url        TEXT COLLATE "C" NOT NULL,
    provider        TEXT COLLATE "C" NOT NULL,
    provider_host   TEXT COLLATE "C" NOT NULL,
    local_path      TEXT COLLATE "C" NOT NULL,
    auth_scope_hash TEXT COLLATE "C" NOT NULL,
    default_branch  TEXT COLLATE "C" NOT NULL,
    host_id         TEXT COLLATE "C" NOT NULL,
    last_fetched_at TEXT COLLATE "C" NOT NULL,
    last_used_at    TEXT COLLATE "C" NOT NULL,
    size_bytes      BIGINT           NOT NULL,
    state           TEXT COLLATE "C" NOT NULL,
    created_at      TEXT COLLATE "C" NOT NULL,
    updated_at      TEXT COLLATE "C" NOT NULL
);

CREATE INDEX sandbox_repo_caches_state_last_used ON sandbox_repo_caches (state, last_used_at);
CREATE INDEX sandbox_repo_caches_last_used ON sandbox_repo_caches (last_used_at, id);
CREATE INDEX sandbox_repo_caches_size ON sandbox_repo_caches (size_bytes);
CREATE INDEX sandbox_repo_caches_host ON sandbox_repo_caches (host_id);

CREATE TABLE sandbox_workspaces (
    id              TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    key             TEXT COLLATE "C" NOT NULL,
    repo_cache_id   TEXT COLLATE "C" NOT NULL,
    repo_host       TEXT COLLATE "C" NOT NULL,
    repo_owner      TEXT COLLATE "C" NOT NULL,
    repo_name       TEXT COLLATE "C" NOT NULL,
    repo_url        TEXT COLLATE "C" NOT NULL,
    project_id      TEXT COLLATE "C" NOT NULL,
    user_id         TEXT COLLATE "C" NOT NULL,
    mode            TEXT COLLATE "C" NOT NULL,
    conversation_id TEXT COLLATE "C",
    task_id         TEXT COLLATE "C",
    base_ref        TEXT COLLATE "C" NOT NULL,
    base_commit     TEXT COLLATE "C" NOT NULL,
    branch_name     TEXT COLLATE "C" NOT NULL,
    local_path      TEXT COLLATE "C" NOT NULL,
    host_id         TEXT COLLATE "C" NOT NULL,
    state           TEXT COLLATE "C" NOT NULL,
    dirty           BOOLEAN          NOT NULL,
    pinned_until    TEXT COLLATE "C",
    cap_writable    BOOLEAN          NOT NULL,
    cap_isolated    BOOLEAN          NOT NULL,
    cap_persistent  BOOLEAN          NOT NULL,
    last_used_at    TEXT COLLATE "C" NOT NULL,
    size_bytes      BIGINT           NOT NULL,
    created_at      TEXT COLLATE "C" NOT NULL,
    updated_at      TEXT COLLATE "C" NOT NULL
);

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
    id                 TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id       TEXT COLLATE "C" NOT NULL,
    backend_kind       TEXT COLLATE "C" NOT NULL,
    backend_runtime_id TEXT COLLATE "C" NOT NULL,
    image              TEXT COLLATE "C" NOT NULL,
    state              TEXT COLLATE "C" NOT NULL,
    last_started_at    TEXT COLLATE "C",
    last_used_at       TEXT COLLATE "C" NOT NULL,
    expires_at         TEXT COLLATE "C",
    created_at         TEXT COLLATE "C" NOT NULL,
    updated_at         TEXT COLLATE "C" NOT NULL
);

CREATE INDEX sandbox_runtimes_workspace ON sandbox_runtimes (workspace_id);
CREATE INDEX sandbox_runtimes_state_last_used ON sandbox_runtimes (state, last_used_at);
CREATE INDEX sandbox_runtimes_last_used ON sandbox_runtimes (last_used_at, id);

-- +goose Down
DROP TABLE sandbox_runtimes;
DROP TABLE sandbox_workspaces;
DROP TABLE sandbox_repo_caches;
