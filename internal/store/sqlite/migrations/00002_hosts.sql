-- Worker host registry ("Several hosts"): one row per worker host,
-- so operators and the service can see which machine holds which local
-- workspaces, its host task queue, data root, disk budget and liveness.
-- Same conventions as 00001_init.sql (times as fixed-width UTC TEXT); the
-- PostgreSQL store has the same table in its 00002_hosts.sql.

-- +goose Up
CREATE TABLE sandbox_hosts (
    host_id           TEXT    NOT NULL PRIMARY KEY,
    task_queue        TEXT    NOT NULL,
    last_heartbeat    TEXT    NOT NULL,
    data_root         TEXT    NOT NULL,
    disk_budget_bytes INTEGER NOT NULL,
    updated_at        TEXT    NOT NULL
) STRICT;

CREATE INDEX sandbox_hosts_last_heartbeat ON sandbox_hosts (last_heartbeat);

-- +goose Down
DROP TABLE sandbox_hosts;
