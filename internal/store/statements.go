package store

import (
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Placeholder renders the n-th (1-based, in text order) bind parameter of a
// statement in one SQL dialect.
type Placeholder func(n int) string

// Dollar is PostgreSQL's placeholder: $1, $2, ….
func Dollar(n int) string { return "$" + strconv.Itoa(n) }

// Question is SQLite's positional placeholder: ? for every parameter.
func Question(int) string { return "?" }

// table is one table's column list: key (the primary key) first, then the
// other columns in the order of the matching XValues and ScanX functions.
type table struct {
	name    string
	columns []string
}

var (
	repoCaches = table{"sandbox_repo_caches", []string{
		"id", "repo_name", "repo_url", "provider", "provider_host", "local_path",
		"auth_scope_hash", "default_branch", "host_id", "last_fetched_at", "last_used_at", "size_bytes",
		"state", "created_at", "updated_at",
	}}
	workspaces = table{"sandbox_workspaces", []string{
		"id", "key", "repo_cache_id", "repo_host", "repo_owner", "repo_name", "repo_url",
		"project_id", "user_id", "mode", "conversation_id", "task_id", "base_ref", "base_commit", "branch_name",
		"local_path", "host_id", "state", "dirty", "pinned_until", "cap_writable", "cap_isolated", "cap_persistent",
		"last_used_at", "size_bytes", "created_at", "updated_at", "base_fetched_at", "network", "network_allow",
	}}
	runtimes = table{"sandbox_runtimes", []string{
		"id", "workspace_id", "backend_kind", "backend_runtime_id", "image", "state",
		"last_started_at", "last_used_at", "expires_at", "created_at", "updated_at",
	}}
	hosts = table{"sandbox_hosts", []string{
		"host_id", "task_queue", "last_heartbeat", "data_root", "disk_budget_bytes", "updated_at",
	}}
)

func (t table) key() string { return t.columns[0] }

// selectAll is SELECT of every column, without a WHERE clause.
func (t table) selectAll() string {
	return "SELECT " + strings.Join(t.columns, ", ") + " FROM " + t.name
}

// get selects the row whose key is parameter 1.
func (t table) get(ph Placeholder) string {
	return t.selectAll() + " WHERE " + t.key() + " = " + ph(1)
}

// del deletes the row whose key is parameter 1.
func (t table) del(ph Placeholder) string {
	return "DELETE FROM " + t.name + " WHERE " + t.key() + " = " + ph(1)
}

// insert inserts one row, parameters in column order.
func (t table) insert(ph Placeholder) string {
	params := make([]string, len(t.columns))
	for i := range params {
		params[i] = ph(i + 1)
	}
	return "INSERT INTO " + t.name + " (" + strings.Join(t.columns, ", ") + ") VALUES (" + strings.Join(params, ", ") + ")"
}

// upsert is insert, replacing on a key conflict every column but the key and
// created_at (which keeps its first value).
func (t table) upsert(ph Placeholder) string {
	var set []string
	for _, c := range t.columns[1:] {
		if c != "created_at" {
			set = append(set, c+" = excluded."+c)
		}
	}
	return t.insert(ph) + " ON CONFLICT (" + t.key() + ") DO UPDATE SET " + strings.Join(set, ", ")
}

// update replaces every column but the key of the row whose key is the last
// parameter; the others come first, in column order.
func (t table) update(ph Placeholder) string {
	set := make([]string, 0, len(t.columns)-1)
	for i, c := range t.columns[1:] {
		set = append(set, c+" = "+ph(i+1))
	}
	return "UPDATE " + t.name + " SET " + strings.Join(set, ", ") + " WHERE " + t.key() + " = " + ph(len(t.columns))
}

// Statements is the SQL text of the statements both SQL stores run on the
// tables of their (separate, per-dialect) migrations, rendered for one
// placeholder style. Parameters are the matching XValues function's values,
// or the one id named, unless a field says otherwise. Build it once with
// NewStatements.
type Statements struct {
	ph Placeholder

	// UpsertRepoCache inserts a repo cache (RepoCacheValues), or replaces
	// every column of the row with its id except created_at.
	UpsertRepoCache string
	// GetRepoCache selects the repo cache with an id, for ScanRepoCache.
	GetRepoCache string
	// ListRepoCaches selects every repo cache, least recently used first
	// (last_used_at, then id).
	ListRepoCaches string
	// DeleteRepoCache deletes the repo cache with an id.
	DeleteRepoCache string

	// CreateWorkspace inserts a workspace (WorkspaceValues).
	CreateWorkspace string
	// UpdateWorkspace replaces every column of the workspace with an id
	// (WorkspaceUpdateValues: the id comes last).
	UpdateWorkspace string
	// GetWorkspace selects the workspace with an id, for ScanWorkspace.
	GetWorkspace string
	// TouchWorkspace sets last_used_at and updated_at of the workspace with an
	// id; parameters: the EncodeTime text twice, then the id.
	TouchWorkspace string
	// DeleteWorkspace deletes the workspace with an id.
	DeleteWorkspace string

	// UpsertRuntime inserts a runtime record (RuntimeValues), or replaces
	// every column of the row with its id except created_at.
	UpsertRuntime string
	// GetRuntime selects the runtime record with an id, for ScanRuntime.
	GetRuntime string
	// DeleteRuntime deletes the runtime record with an id.
	DeleteRuntime string

	// UpsertHost inserts a host (HostValues), or replaces every column of the
	// row with its host id.
	UpsertHost string
	// GetHost selects the host with a host id, for ScanHost.
	GetHost string
	// ListHosts selects every host ordered by host id.
	ListHosts string
}

// NewStatements renders every statement with the placeholders ph (Dollar
// for PostgreSQL, Question for SQLite).
func NewStatements(ph Placeholder) *Statements {
	return &Statements{
		ph: ph,

		UpsertRepoCache: repoCaches.upsert(ph),
		GetRepoCache:    repoCaches.get(ph),
		ListRepoCaches:  repoCaches.selectAll() + " ORDER BY last_used_at, id",
		DeleteRepoCache: repoCaches.del(ph),

		CreateWorkspace: workspaces.insert(ph),
		UpdateWorkspace: workspaces.update(ph),
		GetWorkspace:    workspaces.get(ph),
		TouchWorkspace:  "UPDATE " + workspaces.name + " SET last_used_at = " + ph(1) + ", updated_at = " + ph(2) + " WHERE id = " + ph(3),
		DeleteWorkspace: workspaces.del(ph),

		UpsertRuntime: runtimes.upsert(ph),
		GetRuntime:    runtimes.get(ph),
		DeleteRuntime: runtimes.del(ph),

		UpsertHost: hosts.upsert(ph),
		GetHost:    hosts.get(ph),
		ListHosts:  hosts.selectAll() + " ORDER BY host_id",
	}
}

// ListWorkspaces returns the query and parameters selecting the workspaces
// that match every non-zero field of f (equality on UserID, ProjectID,
// RepoCacheID, HostID, Mode, State; last_used_at strictly before
// LastUsedBefore), least recently used first (last_used_at, then id), at most
// f.Limit rows when f.Limit > 0, for ScanWorkspace. Errors:
// sandboxapi.ErrInvalidArgument for an unrepresentable LastUsedBefore.
func (s *Statements) ListWorkspaces(f sandbox.WorkspaceFilter) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+s.ph(len(args)))
	}
	for _, eq := range []struct{ col, v string }{
		{"user_id", f.UserID}, {"project_id", f.ProjectID}, {"repo_cache_id", f.RepoCacheID},
		{"host_id", f.HostID}, {"mode", string(f.Mode)}, {"state", string(f.State)},
	} {
		if eq.v != "" {
			add(eq.col+" = ", eq.v)
		}
	}
	if !f.LastUsedBefore.IsZero() {
		before, err := EncodeTime("last_used_before", f.LastUsedBefore)
		if err != nil {
			return "", nil, err
		}
		add("last_used_at < ", before)
	}
	q := workspaces.selectAll()
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY last_used_at, id"
	if f.Limit > 0 {
		args = append(args, int64(f.Limit))
		q += " LIMIT " + s.ph(len(args))
	}
	return q, args, nil
}

// ListRuntimes returns the query and parameters selecting the runtime
// records of workspaceID, or every record when workspaceID is "", least
// recently used first (last_used_at, then id), for ScanRuntime.
func (s *Statements) ListRuntimes(workspaceID string) (string, []any) {
	q := runtimes.selectAll()
	var args []any
	if workspaceID != "" {
		q += " WHERE workspace_id = " + s.ph(1)
		args = append(args, workspaceID)
	}
	return q + " ORDER BY last_used_at, id", args
}
