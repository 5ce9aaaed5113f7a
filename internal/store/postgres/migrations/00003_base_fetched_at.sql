-- When the repo cache a workspace's base commit was resolved in had last
-- fetched from the remote (docs/API.md "acquire": base_fetched_at): a new
-- workspace on the default branch may start from a tip up to
-- SANDBOX_FETCH_FRESHNESS old, and the handle says how old. NULL for
-- workspaces created before this column. Same conventions as 00001_init.sql;
-- the SQLite store has the same column in its 00003_base_fetched_at.sql.

-- +goose Up
ALTER TABLE sandbox_workspaces ADD COLUMN base_fetched_at TEXT COLLATE "C";

-- +goose Down
ALTER TABLE sandbox_workspaces DROP COLUMN base_fetched_at;
