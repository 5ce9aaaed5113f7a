-- Worker host registry ("Several hosts"): one row per worker host,
-- so operators and the service can see which machine holds which local
-- workspaces, its host task queue, data root, disk budget and liveness.
-- Same conventions as 00001_init.sql (times as fixed-width UTC text, byte
-- collation); the SQLite store has the same table in its 00002_hosts.sql.

-- +goose Up
CREATE TABLE sandbox_hosts (
    host_id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    task_queue        TEXT COLLATE "C" NOT NULL,
    last_heartbeat    TEXT COLLATE "C" NOT NULL,
    data_root         TEXT COLLATE "C" NOT NULL,
    disk_budget_bytes BIGINT           NOT NULL,
    updated_at        TEXT COLLATE "C" NOT NULL
);

CREATE INDEX sandbox_hosts_last_heartbeat ON sandbox_hosts (last_heartbeat);

-- +goose Down
DROP TABLE sandbox_hosts;
