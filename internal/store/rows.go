package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Row is one result row to read: *sql.Row and *sql.Rows (database/sql, the
// SQLite store) and pgx.Row and pgx.Rows (the PostgreSQL store) all satisfy
// it. Scan's error is passed on unchanged, so a caller still sees its
// driver's "no rows" sentinel (sql.ErrNoRows, pgx.ErrNoRows).
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set to read row by row: *sql.Rows and pgx.Rows satisfy it.
// Closing it stays with the caller (the two drivers' Close differ).
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Collect reads every remaining row of rows with scan into a non-nil slice.
// It returns the first scan error, else rows.Err(). It does not close rows.
func Collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// requireID rejects an empty id with sandboxapi.ErrInvalidArgument; what names
// the record ("workspace", "host", …) in the message.
func requireID(what, id string) error {
	if id == "" {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s id: must not be empty", what)
	}
	return nil
}

// ---- times ----

// TimeLayout is how the SQL stores keep every time: TEXT in UTC, fixed width
// (YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ) so that text order is time order, with
// nanoseconds, and the zero time.Time representable (year 1).
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// EncodeTime returns t in UTC as TimeLayout text. field names the column for
// the sandboxapi.ErrInvalidArgument returned when the year is outside 0000–9999
// (which TimeLayout cannot hold).
func EncodeTime(field string, t time.Time) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s %s: year outside 0000-9999", field, t.Format(time.RFC3339Nano))
	}
	return t.Format(TimeLayout), nil
}

// DecodeTime parses TimeLayout text s read from column field, in UTC.
func DecodeTime(field, s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("column %s: bad time %q: %w", field, s, err)
	}
	return t.UTC(), nil
}

// timeCodec encodes and decodes a row's times, keeping the first error, so
// that a row's values can be built (or read back) in one expression list.
type timeCodec struct{ err error }

func (c *timeCodec) keep(err error) {
	if err != nil && c.err == nil {
		c.err = err
	}
}

// t encodes a NOT NULL time column.
func (c *timeCodec) t(field string, t time.Time) string {
	s, err := EncodeTime(field, t)
	c.keep(err)
	return s
}

// p encodes a nullable time column: nil is NULL (an untyped nil argument,
// which both drivers bind as NULL).
func (c *timeCodec) p(field string, t *time.Time) any {
	if t == nil {
		return nil
	}
	return c.t(field, *t)
}

// dt decodes a NOT NULL time column.
func (c *timeCodec) dt(field, s string) time.Time {
	t, err := DecodeTime(field, s)
	c.keep(err)
	return t
}

// dp decodes a nullable time column scanned into a *string.
func (c *timeCodec) dp(field string, s *string) *time.Time {
	if s == nil {
		return nil
	}
	t := c.dt(field, *s)
	return &t
}

// nullIfEmpty stores "" as NULL (conversation_id, task_id), so the per-mode
// partial unique indexes ignore it.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deref reads a nullable text column back: NULL is "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ---- records ↔ rows ----
//
// Each XValues function returns a record's column values in the order of its
// table's column list (see statements.go), ready to bind; each ScanX reads a
// row selected with that column list back. The values are plain Go strings,
// integers, booleans and untyped nils, which database/sql and pgx bind alike.

// RepoCacheValues returns c's sandbox_repo_caches column values in
// column-list order (the UpsertRepoCache statement's parameters).
// Errors: sandboxapi.ErrInvalidArgument for an empty ID (checked first) or an
// unrepresentable time.
func RepoCacheValues(c sandbox.RepoCache) ([]any, error) {
	if err := requireID("repo cache", c.ID); err != nil {
		return nil, err
	}
	var tc timeCodec
	values := []any{
		c.ID, c.RepoName, c.RepoURL, c.Provider, c.ProviderHost, c.LocalPath,
		c.AuthScopeHash, c.DefaultBranch, c.HostID,
		tc.t("last_fetched_at", c.LastFetchedAt), tc.t("last_used_at", c.LastUsedAt),
		c.SizeBytes, string(c.State),
		tc.t("created_at", c.CreatedAt), tc.t("updated_at", c.UpdatedAt),
	}
	return values, tc.err
}

// ScanRepoCache reads one sandbox_repo_caches row selected with the
// statements' column list.
func ScanRepoCache(row Row) (sandbox.RepoCache, error) {
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
	var tc timeCodec
	c.State = sandbox.RepoCacheState(state)
	c.LastFetchedAt = tc.dt("last_fetched_at", lastFetched)
	c.LastUsedAt = tc.dt("last_used_at", lastUsed)
	c.CreatedAt = tc.dt("created_at", createdAt)
	c.UpdatedAt = tc.dt("updated_at", updatedAt)
	return c, tc.err
}

// WorkspaceValues returns ws's sandbox_workspaces column values in
// column-list order (the CreateWorkspace statement's parameters): an empty
// ConversationID or TaskID and a nil PinnedUntil or BaseFetchedAt are NULL.
// Errors: sandboxapi.ErrInvalidArgument for an empty ID (checked first) or an
// unrepresentable time.
func WorkspaceValues(ws sandboxapi.Workspace) ([]any, error) {
	if err := requireID("workspace", ws.ID); err != nil {
		return nil, err
	}
	return workspaceValues(ws)
}

// WorkspaceUpdateValues returns ws's values in the UpdateWorkspace
// statement's parameter order: every column but id, then id (for the WHERE
// clause). An empty ID is not rejected here: the update matches no row.
// Errors: sandboxapi.ErrInvalidArgument for an unrepresentable time.
func WorkspaceUpdateValues(ws sandboxapi.Workspace) ([]any, error) {
	values, err := workspaceValues(ws)
	if err != nil {
		return nil, err
	}
	return append(values[1:], values[0]), nil
}

// workspaceValues is WorkspaceValues without the ID check.
func workspaceValues(ws sandboxapi.Workspace) ([]any, error) {
	var tc timeCodec
	values := []any{
		ws.ID, ws.Key, ws.RepoCacheID, ws.Repo.Host, ws.Repo.Owner, ws.Repo.Name, ws.Repo.URL,
		ws.ProjectID, ws.UserID, string(ws.Mode), nullIfEmpty(ws.ConversationID), nullIfEmpty(ws.TaskID),
		ws.BaseRef, ws.BaseCommit, ws.BranchName, ws.LocalPath, ws.HostID, string(ws.State),
		ws.Dirty, tc.p("pinned_until", ws.PinnedUntil),
		ws.Capabilities.Writable, ws.Capabilities.Isolated, ws.Capabilities.Persistent,
		tc.t("last_used_at", ws.LastUsedAt), ws.SizeBytes,
		tc.t("created_at", ws.CreatedAt), tc.t("updated_at", ws.UpdatedAt),
		tc.p("base_fetched_at", ws.BaseFetchedAt),
		string(ws.Network), encodeList(ws.NetworkAllow),
	}
	return values, tc.err
}

// encodeList stores a list of strings as a JSON array ("" when empty).
func encodeList(l []string) string {
	if len(l) == 0 {
		return ""
	}
	b, _ := json.Marshal(l) // strings always encode
	return string(b)
}

// decodeList reads encodeList's form back (nil for "").
func decodeList(column, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "stored %s is not a JSON list of strings", column)
	}
	return l, nil
}

// ScanWorkspace reads one sandbox_workspaces row selected with the
// statements' column list (NULL conversation_id and task_id read back as "").
func ScanWorkspace(row Row) (sandboxapi.Workspace, error) {
	var (
		ws                                  sandboxapi.Workspace
		mode, state, network, networkAllow  string
		conversationID, taskID, pinnedUntil *string
		baseFetched                         *string
		lastUsed, createdAt, updatedAt      string
	)
	err := row.Scan(&ws.ID, &ws.Key, &ws.RepoCacheID, &ws.Repo.Host, &ws.Repo.Owner, &ws.Repo.Name, &ws.Repo.URL,
		&ws.ProjectID, &ws.UserID, &mode, &conversationID, &taskID, &ws.BaseRef, &ws.BaseCommit, &ws.BranchName,
		&ws.LocalPath, &ws.HostID, &state, &ws.Dirty, &pinnedUntil,
		&ws.Capabilities.Writable, &ws.Capabilities.Isolated, &ws.Capabilities.Persistent,
		&lastUsed, &ws.SizeBytes, &createdAt, &updatedAt, &baseFetched, &network, &networkAllow)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	var tc timeCodec
	ws.Network = sandboxapi.Network(network)
	if ws.NetworkAllow, err = decodeList("network_allow", networkAllow); err != nil {
		return sandboxapi.Workspace{}, err
	}
	ws.Mode = sandboxapi.WorkspaceMode(mode)
	ws.State = sandboxapi.WorkspaceState(state)
	ws.ConversationID = deref(conversationID)
	ws.TaskID = deref(taskID)
	ws.PinnedUntil = tc.dp("pinned_until", pinnedUntil)
	ws.LastUsedAt = tc.dt("last_used_at", lastUsed)
	ws.CreatedAt = tc.dt("created_at", createdAt)
	ws.UpdatedAt = tc.dt("updated_at", updatedAt)
	ws.BaseFetchedAt = tc.dp("base_fetched_at", baseFetched)
	return ws, tc.err
}

// RuntimeValues returns r's sandbox_runtimes column values in column-list
// order (the UpsertRuntime statement's parameters): a nil LastStartedAt or
// ExpiresAt is NULL. Errors: sandboxapi.ErrInvalidArgument for an empty ID
// (checked first) or an unrepresentable time.
func RuntimeValues(r sandbox.RuntimeRecord) ([]any, error) {
	if err := requireID("runtime", r.ID); err != nil {
		return nil, err
	}
	var tc timeCodec
	values := []any{
		r.ID, r.WorkspaceID, r.BackendKind, r.BackendRuntimeID, r.Image, string(r.State),
		tc.p("last_started_at", r.LastStartedAt), tc.t("last_used_at", r.LastUsedAt),
		tc.p("expires_at", r.ExpiresAt), tc.t("created_at", r.CreatedAt), tc.t("updated_at", r.UpdatedAt),
	}
	return values, tc.err
}

// ScanRuntime reads one sandbox_runtimes row selected with the statements'
// column list.
func ScanRuntime(row Row) (sandbox.RuntimeRecord, error) {
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
	var tc timeCodec
	r.State = sandbox.RuntimeState(state)
	r.LastStartedAt = tc.dp("last_started_at", lastStarted)
	r.LastUsedAt = tc.dt("last_used_at", lastUsed)
	r.ExpiresAt = tc.dp("expires_at", expires)
	r.CreatedAt = tc.dt("created_at", createdAt)
	r.UpdatedAt = tc.dt("updated_at", updatedAt)
	return r, tc.err
}

// HostValues returns h's sandbox_hosts column values in column-list order
// (the UpsertHost statement's parameters). Errors:
// sandboxapi.ErrInvalidArgument for an empty HostID (checked first) or an
// unrepresentable time.
func HostValues(h Host) ([]any, error) {
	if err := requireID("host", h.HostID); err != nil {
		return nil, err
	}
	var tc timeCodec
	values := []any{h.HostID, h.TaskQueue, tc.t("last_heartbeat", h.LastHeartbeat), h.DataRoot,
		h.DiskBudgetBytes, tc.t("updated_at", h.UpdatedAt)}
	return values, tc.err
}

// ScanHost reads one sandbox_hosts row selected with the statements' column
// list.
func ScanHost(row Row) (Host, error) {
	var (
		h                  Host
		heartbeat, updated string
	)
	if err := row.Scan(&h.HostID, &h.TaskQueue, &heartbeat, &h.DataRoot, &h.DiskBudgetBytes, &updated); err != nil {
		return Host{}, err
	}
	var tc timeCodec
	h.LastHeartbeat = tc.dt("last_heartbeat", heartbeat)
	h.UpdatedAt = tc.dt("updated_at", updated)
	return h, tc.err
}
