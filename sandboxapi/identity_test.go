package sandboxapi

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var updateVectors = flag.Bool("update-identity-vectors", false, "rewrite testdata/identity-vectors.json from the Go derivation")

// identityVector is one entry of testdata/identity-vectors.json: a request
// and every name docs/API.md "Identity" derives from it, for SDKs in other
// languages to check their derivation against.
type identityVector struct {
	Request         WorkspaceRequest `json:"request"`
	Key             string           `json:"key"`
	WorkspaceID     string           `json:"workspace_id"`
	WorkflowID      string           `json:"workflow_id"`
	RuntimeID       string           `json:"runtime_id"`
	TenantSegment   string           `json:"tenant_segment"`
	Branch          string           `json:"branch"`
	WorktreeDirName string           `json:"worktree_dir_name"`
	// FanoutID is vectorFanoutID; FanoutWorkflowID the workflow id of the
	// request's tenant's fan-out of that id.
	FanoutID         string `json:"fanout_id"`
	FanoutWorkflowID string `json:"fanout_workflow_id"`
}

// vectorFanoutID is the fan-out id of every vector's fanout_workflow_id.
const vectorFanoutID = "f1"

func vectorFor(r WorkspaceRequest) identityVector {
	ws := WorkspaceIDForKey(r.Key())
	wf, _ := SessionWorkflowID(ws)
	fwf, _ := FanoutWorkflowID(Tenant{UserID: r.UserID, ProjectID: r.ProjectID}, vectorFanoutID)
	return identityVector{Request: r, Key: r.Key(), WorkspaceID: ws, WorkflowID: wf, RuntimeID: RuntimeIDFor(ws),
		TenantSegment: TenantSegment(r.UserID, r.ProjectID), Branch: r.Branch(), WorktreeDirName: r.WorktreeDirName(),
		FanoutID: vectorFanoutID, FanoutWorkflowID: fwf}
}

// TestIdentityVectors checks the shared identity vectors
// (sandboxapi/testdata/identity-vectors.json, docs/API.md "Identity")
// against the Go derivation: other SDKs run the same file.
func TestIdentityVectors(t *testing.T) {
	url := "https://github.com/acme/app.git"
	reqs := []WorkspaceRequest{
		{UserID: "alice", ProjectID: "p1", RepoURL: url, Mode: ModeEdit, ConversationID: "c1"},
		{UserID: "bob", ProjectID: "p1", RepoURL: url, Mode: ModeEdit, ConversationID: "c1"},
		{UserID: "alice", ProjectID: "p2", RepoURL: url, Mode: ModeEdit, ConversationID: "c1"},
		{UserID: "alice", ProjectID: "p1", RepoURL: url, Mode: ModeTask, TaskID: "t1"},
		{UserID: "alice", ProjectID: "p1", RepoURL: url, Mode: ModeTask, TaskID: "t1", BranchName: "agent/feature-x"},
		{UserID: "alice", ProjectID: "p1", RepoURL: url, Mode: ModeAnalysis},
		{UserID: "alice", ProjectID: "p1", RepoURL: url, Mode: ModeAnalysis, BaseRef: "release/1.2"},
	}
	path := filepath.Join("testdata", "identity-vectors.json")
	if *updateVectors {
		var vs []identityVector
		for _, r := range reqs {
			vs = append(vs, vectorFor(r))
		}
		b, err := json.MarshalIndent(vs, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []identityVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(reqs) {
		t.Fatalf("%d vectors, want %d (run with -update-identity-vectors)", len(vs), len(reqs))
	}
	for i, v := range vs {
		if got := vectorFor(v.Request); !reflect.DeepEqual(got, v) {
			t.Errorf("vector %d: derived %+v, file says %+v", i, got, v)
		}
	}
	// Spelled out once, so a change of the derivation is a visible change here.
	if got := vs[0].Branch; got != "agent/"+vs[0].TenantSegment+"/edits-c1" {
		t.Errorf("edit branch %q", got)
	}
	if got := vs[0].FanoutWorkflowID; got != "sandbox-fanout/"+vs[0].TenantSegment+"/f1" {
		t.Errorf("fan-out workflow id %q", got)
	}
}

// TestNamesAreTenantUnique: two tenants (another user, or another project
// of the same user) with the same conversation, task or fan-out id get
// different branches, worktree directories, workspace, workflow, runtime
// and fan-out workflow ids.
func TestNamesAreTenantUnique(t *testing.T) {
	url := "https://github.com/acme/app.git"
	for _, mode := range []WorkspaceMode{ModeEdit, ModeTask, ModeAnalysis} {
		mk := func(user, project string) identityVector {
			r := WorkspaceRequest{UserID: user, ProjectID: project, RepoURL: url, Mode: mode}
			switch mode {
			case ModeEdit:
				r.ConversationID = "c1"
			case ModeTask:
				r.TaskID = "t1"
			}
			if _, err := r.Validate(PermissiveURLs); err != nil {
				t.Fatal(err)
			}
			return vectorFor(r)
		}
		// Long ids sharing their first 40 bytes: the cut parts of the
		// directory name are equal, the hash still tells them apart.
		long := strings.Repeat("u", 40)
		vs := []identityVector{mk("alice", "p1"), mk("bob", "p1"), mk("alice", "p2"), mk(long+"1", "p1"), mk(long+"2", "p1")}
		for i := range vs {
			for j := range i {
				a, b := vs[i], vs[j]
				if mode != ModeAnalysis && a.Branch == b.Branch {
					t.Errorf("%s: %s and %s share branch %s", mode, a.Key, b.Key, a.Branch)
				}
				if a.WorktreeDirName == b.WorktreeDirName || a.WorkspaceID == b.WorkspaceID || a.WorkflowID == b.WorkflowID || a.RuntimeID == b.RuntimeID ||
					a.FanoutWorkflowID == b.FanoutWorkflowID {
					t.Errorf("%s: %s and %s share a name: %+v %+v", mode, a.Key, b.Key, a, b)
				}
			}
		}
	}
}

// TestBranchNameStaysOutOfOtherTenants: a caller-named branch may not be,
// or lie under, another tenant's namespace agent/<segment>/ (where that
// tenant's workspaces' branches are derived), nor be a namespace itself;
// its own namespace and other agent/ names are fine.
func TestBranchNameStaysOutOfOtherTenants(t *testing.T) {
	base := WorkspaceRequest{UserID: "alice", ProjectID: "p1", RepoURL: "https://github.com/acme/app.git", Mode: ModeEdit, ConversationID: "c9"}
	own, other := TenantSegment("alice", "p1"), TenantSegment("bob", "p1")
	for name, wantErr := range map[string]bool{
		"agent/" + other + "/edits-c1": true,
		"agent/" + other + "/x/y":      true,
		"agent/" + other:               true,
		"agent/" + own:                 true,
		"agent/" + own + "/":           true,
		"agent/" + own + "/edits-c1":   false,
		"agent/" + own + "/feature":    false,
		"agent/feature-x":              false,
		"agent/edits-c1":               false, // a legacy name: the store check refuses it while a workspace holds it
		"agent/0123456789ABCDEF/x":     false, // not a segment: uppercase
	} {
		r := base
		r.BranchName = name
		_, err := r.Validate(PermissiveURLs)
		if wantErr {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("branch_name %q: got %v, want InvalidArgument", name, err)
			} else if strings.Contains(err.Error(), "bob") {
				t.Errorf("branch_name %q: message names another tenant: %v", name, err)
			}
		} else if err != nil && name != "agent/"+own+"/" {
			t.Errorf("branch_name %q: %v", name, err)
		}
	}
}

// TestFanoutWorkflowIDs: the fan-out workflow id holds the tenant segment,
// parses back to it and the fan-out id, the legacy form parses with no
// segment, and nothing else parses; malformed ids are InvalidArgument.
func TestFanoutWorkflowIDs(t *testing.T) {
	alice := Tenant{UserID: "alice", ProjectID: "p1"}
	wf, err := FanoutWorkflowID(alice, "f-1")
	if err != nil || wf != "sandbox-fanout/"+alice.Segment()+"/f-1" {
		t.Fatalf("FanoutWorkflowID: %q, %v", wf, err)
	}
	if seg, id, ok := ParseFanoutWorkflowID(wf); !ok || seg != alice.Segment() || id != "f-1" {
		t.Errorf("parse %q: %q %q %v", wf, seg, id, ok)
	}
	legacy, err := LegacyFanoutWorkflowID("f-1")
	if err != nil || legacy != "sandbox-fanout/f-1" {
		t.Fatalf("LegacyFanoutWorkflowID: %q, %v", legacy, err)
	}
	if seg, id, ok := ParseFanoutWorkflowID(legacy); !ok || seg != "" || id != "f-1" {
		t.Errorf("parse %q: %q %q %v", legacy, seg, id, ok)
	}
	for _, bad := range []string{"", "sandbox-fanout/", "sandbox-session/f1", "sandbox-fanout/" + alice.Segment() + "/",
		"sandbox-fanout/" + alice.Segment(), // a segment alone is a legacy fan-out id: fine
		"sandbox-fanout/ABCDEF0123456789/f1", "sandbox-fanout/" + alice.Segment() + "/f1/x", "sandbox-fanout/x/f1", "sandbox-fanout/-f"} {
		_, _, ok := ParseFanoutWorkflowID(bad)
		if want := bad == "sandbox-fanout/"+alice.Segment(); ok != want {
			t.Errorf("parse %q: ok %v, want %v", bad, ok, want)
		}
	}
	for _, c := range []struct {
		tenant Tenant
		id     string
	}{{Tenant{"", "p1"}, "f"}, {Tenant{"alice", ""}, "f"}, {Tenant{"a|b", "p1"}, "f"}, {alice, ""}, {alice, "a/b"}, {alice, "-f"}} {
		if _, err := FanoutWorkflowID(c.tenant, c.id); !IsInvalidArgument(err) {
			t.Errorf("FanoutWorkflowID(%+v, %q): %v, want InvalidArgument", c.tenant, c.id, err)
		}
	}
	if _, err := LegacyFanoutWorkflowID("a/b"); !IsInvalidArgument(err) {
		t.Errorf("LegacyFanoutWorkflowID(a/b): %v", err)
	}
}
