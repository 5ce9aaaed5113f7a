-- Per-workspace network policy (docs/SECURITY.md "Network modes"): the
-- widest network mode its commands may use ('' for a workspace recorded
-- before policies: the worker's SANDBOX_RUNTIME_NETWORK applies) and its
-- own allow-list entries, a JSON array of canonical entries ('' for none).
-- The SQLite store has the same columns in its 00004_network_policy.sql.

-- +goose Up
ALTER TABLE sandbox_workspaces ADD COLUMN network TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE sandbox_workspaces ADD COLUMN network_allow TEXT COLLATE "C" NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandbox_workspaces DROP COLUMN network_allow;
ALTER TABLE sandbox_workspaces DROP COLUMN network;
