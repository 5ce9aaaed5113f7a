// Package schema generates the JSON Schema (draft 2020-12) of sandboxcore's
// wire contract from the Go types of package sandboxapi (docs/API.md
// "Schema"): one schema file whose $defs hold every argument and result
// type, with the enums the contract states, and an index naming the
// definition of each update's, signal's, query's and workflow's argument and
// result. `make schema` writes them under docs/schema/; a test fails when the
// committed files are stale.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// File names under docs/schema/.
const (
	SchemaFile = "sandboxcore.schema.json"
	IndexFile  = "index.json"
)

// SchemaID is the $id of the schema file; definitions are referenced as
// SchemaID + "#/$defs/<Name>".
const SchemaID = "urn:sandboxcore:contract:v1"

// Index is index.json: for every update, signal, query and workflow of the
// contract, the $defs names of its argument and result ("" = none).
type Index struct {
	ContractVersion string                 `json:"contract_version"`
	Schema          string                 `json:"schema"`
	Updates         map[string]IndexUpdate `json:"updates"`
	// Messages are keyed "<workflow type>/<kind>/<name>", e.g.
	// "SessionWorkflow/signal/pin", "TaskFanoutWorkflow/workflow/TaskFanoutWorkflow".
	Messages map[string]IndexEntry `json:"messages"`
	// Errors names the definition of every application error's detail value.
	Errors string `json:"errors"`
}

// IndexEntry names an argument and a result definition.
type IndexEntry struct {
	Argument string `json:"argument,omitempty"`
	Result   string `json:"result,omitempty"`
}

// IndexUpdate is one update's entry.
type IndexUpdate struct {
	IndexEntry
	Mutating bool `json:"mutating"`
	// Immediate: the update never waits for the session's lock.
	Immediate bool   `json:"immediate,omitempty"`
	Summary   string `json:"summary"`
}

// Generate returns the contents of SchemaFile, IndexFile and tools.CatalogFile
// (the agent tools' definitions, tools.Catalog). apiDir is the
// directory of package sandboxapi's source, whose doc comments become the
// descriptions. Errors: a type the reflector cannot describe.
func Generate(apiDir string) (map[string][]byte, error) {
	r, err := newReflector(apiDir)
	if err != nil {
		return nil, err
	}
	c := &collector{r: r, defs: jsonschema.Definitions{}}
	idx := c.index()
	if err := applyEnums(c.defs); err != nil {
		return nil, err
	}
	if err := applyNullable(c.defs, c.roots); err != nil {
		return nil, err
	}
	root := &jsonschema.Schema{
		Version:     jsonschema.Version,
		ID:          SchemaID,
		Title:       "sandboxcore wire contract " + sandboxapi.ContractVersion,
		Description: "Arguments and results of sandboxcore's Temporal updates, signals, queries and workflows (docs/API.md). Byte fields are base64 strings; durations are integer nanoseconds.",
		Definitions: c.defs,
	}
	schemaJSON, err := marshal(root)
	if err != nil {
		return nil, err
	}
	indexJSON, err := marshal(idx)
	if err != nil {
		return nil, err
	}
	toolsJSON, err := tools.Catalog()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{SchemaFile: schemaJSON, IndexFile: indexJSON, tools.CatalogFile: toolsJSON}, nil
}

// DurationKeyword is the schema keyword (an annotation validators ignore)
// that marks an integer property holding a time.Duration, in nanoseconds:
// "x-duration": "nanoseconds" (docs/API.md "Schema").
const DurationKeyword = "x-duration"

// newReflector is the reflector of the contract: definitions named by
// their Go type names, the contract's named string types as inline
// enumerations (namedEnums), every struct closed (additionalProperties:
// false, as the worker decodes strictly), and the doc comments of the
// package in apiDir as descriptions. Errors: apiDir unreadable, or its
// comments.
func newReflector(apiDir string) (*jsonschema.Reflector, error) {
	named := namedEnums()
	r := &jsonschema.Reflector{
		Namer: func(t reflect.Type) string { return t.Name() },
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == reflect.TypeFor[time.Duration]() {
				// Integer nanoseconds on the wire; DurationKeyword marks them
				// so that generated clients can offer their language's
				// duration type (python/: datetime.timedelta).
				return &jsonschema.Schema{Type: "integer", Extras: map[string]any{DurationKeyword: "nanoseconds"}}
			}
			vals, ok := named[t]
			if !ok {
				return nil
			}
			return &jsonschema.Schema{Type: "string", Enum: anys(vals)}
		},
		AllowAdditionalProperties: false,
	}
	base, err := commentBase(apiDir)
	if err != nil {
		return nil, err
	}
	if err := r.AddGoComments(base, apiDir, jsonschema.WithFullComment()); err != nil {
		return nil, fmt.Errorf("schema: read doc comments: %w", err)
	}
	return r, nil
}

// commentBase is the base import path AddGoComments needs for apiDir: its
// comment map is keyed by base joined with the walked directory, so base is
// the import path of the working directory (relative to apiDir's parent,
// the module root). Errors: the paths cannot be made absolute or related.
func commentBase(apiDir string) (string, error) {
	absAPI, err := filepath.Abs(apiDir)
	if err != nil {
		return "", err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(filepath.Dir(absAPI), cwd)
	if err != nil {
		return "", err
	}
	return path.Join("github.com/sandboxcore/sandboxcore", filepath.ToSlash(rel)), nil
}

// collector gathers the definitions of the reflected root types.
type collector struct {
	r     *jsonschema.Reflector
	defs  jsonschema.Definitions
	roots []reflect.Type
}

// add reflects t (nil: nothing, "") into c's definitions and returns its
// definition's name.
func (c *collector) add(t reflect.Type) string {
	if t == nil {
		return ""
	}
	c.roots = append(c.roots, t)
	s := c.r.ReflectFromType(t)
	for name, d := range s.Definitions {
		c.defs[name] = d
	}
	return t.Name()
}

// index reflects every operation's and message's argument and result and
// the error details, in that order, and returns the index naming them.
func (c *collector) index() Index {
	idx := Index{ContractVersion: sandboxapi.ContractVersion, Schema: SchemaFile,
		Updates: map[string]IndexUpdate{}, Messages: map[string]IndexEntry{}}
	for _, op := range sandboxapi.Operations() {
		in, out := c.add(op.In), c.add(op.Out)
		idx.Updates[op.Name] = IndexUpdate{IndexEntry: IndexEntry{Argument: ref(in), Result: ref(out)}, Mutating: op.Mutating, Immediate: op.Immediate, Summary: op.Summary}
	}
	for _, m := range sandboxapi.Messages() {
		in, out := c.add(m.In), c.add(m.Out)
		idx.Messages[m.Workflow+"/"+m.Kind+"/"+m.Name] = IndexEntry{Argument: ref(in), Result: ref(out)}
	}
	idx.Errors = ref(c.add(reflect.TypeFor[sandboxapi.ErrorDetails]()))
	return idx
}

func ref(def string) string {
	if def == "" {
		return ""
	}
	return "#/$defs/" + def
}

// enum is one stated enumeration: a definition's property (or the
// definition itself when Property is "") takes exactly Values.
type enum struct {
	Def, Property string
	Values        []string
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// enums are the contract's enumerations (docs/API.md).
func enums() []enum {
	push := []string{sandboxapi.PushCreated, sandboxapi.PushFastForward, sandboxapi.PushForced, sandboxapi.PushUpToDate}
	merge := []string{sandboxapi.MergeMerged, sandboxapi.MergeConflict, sandboxapi.MergeMissing, sandboxapi.MergeFailed, sandboxapi.MergeClean}
	outcomes := []string{sandboxapi.OutcomeDone, sandboxapi.OutcomeSkipped, sandboxapi.OutcomeBlocked, sandboxapi.OutcomeFailed, sandboxapi.OutcomePending}
	return []enum{
		{Def: "SessionDescription", Property: "state", Values: sandboxapi.SessionStates},
		{Def: "Handle", Property: "runtime_kind", Values: sandboxapi.RuntimeKinds},
		{Def: "SessionDescription", Property: "runtime_kind", Values: sandboxapi.RuntimeKinds},
		{Def: "FileEntry", Property: "type", Values: sandboxapi.FileEntryTypes},
		{Def: "FileStatus", Property: "status", Values: sandboxapi.FileStatusCodes},
		{Def: "EditFileInput", Property: "command", Values: sandboxapi.EditCommands},
		{Def: "ReadOutputInput", Property: "stream", Values: []string{sandboxapi.StreamStdout, sandboxapi.StreamStderr}},
		{Def: "ReadOutputResult", Property: "stream", Values: []string{sandboxapi.StreamStdout, sandboxapi.StreamStderr}},
		{Def: "PushResult", Property: "status", Values: push},
		{Def: "BranchMerge", Property: "status", Values: merge},
		{Def: "MergeRequest", Property: "order", Values: []string{"", sandboxapi.MergeOrderGiven, sandboxapi.MergeOrderLeastConflicts}},
		{Def: "TaskResult", Property: "merge_preview", Values: merge},
		{Def: "Overlap", Property: "risk", Values: []string{sandboxapi.RiskHigh, sandboxapi.RiskMedium}},
		{Def: "OverlapFile", Property: "this_change", Values: sandboxapi.ChangeKinds},
		{Def: "OverlapFile", Property: "other_change", Values: sandboxapi.ChangeKinds},
		{Def: "UncheckedWorkspace", Property: "reason", Values: []string{sandboxapi.UncheckedOtherHost, sandboxapi.UncheckedEvicted, sandboxapi.UncheckedUnreadable}},
		{Def: "EvictResult", Property: "outcome", Values: outcomes},
		{Def: "EvictionPlan", Property: "pressure", Values: []string{"none", "high", "severe"}},
		{Def: "EvictionHeld", Property: "kind", Values: []string{"workspace", "repo_cache"}},
		{Def: "ReleaseResult", Property: "runtime", Values: []string{"stopped", "destroyed", "not running"}},
		{Def: "Workspace", Property: "state", Values: []string{"creating", "ready", "evicted", "removed"}},
		{Def: "ErrorDetails", Property: "family", Values: []string{sandboxapi.FamilySandbox, sandboxapi.FamilyWorkspace}},
		{Def: "ErrorDetails", Property: "kind", Values: topKinds()},
		{Def: "ErrorDetails", Property: "sub_kind", Values: subKinds()},
		{Def: "FanoutReport", Property: "state", Values: []string{sandboxapi.FanoutPreparing, sandboxapi.FanoutRunning, sandboxapi.FanoutMerging, sandboxapi.FanoutCompleted, sandboxapi.FanoutFailed}},
		{Def: "TaskResult", Property: "status", Values: []string{sandboxapi.TaskPending, sandboxapi.TaskAcquiring, sandboxapi.TaskRunning, sandboxapi.TaskWaiting, sandboxapi.TaskFinishing, sandboxapi.TaskSucceeded, sandboxapi.TaskFailed, sandboxapi.TaskTimedOut, sandboxapi.TaskError}},
		{Def: "TaskResult", Property: "kind", Values: []string{sandboxapi.TaskKindScript, sandboxapi.TaskKindAgent}},
		{Def: "ProcessInfo", Property: "exit_reason", Values: sandboxapi.ExitReasons},
		{Def: "ProcessReadResult", Property: "exit_reason", Values: sandboxapi.ExitReasons},
		{Def: "ProcessReadResult", Property: "stream", Values: sandboxapi.ProcessStreams},
		{Def: "ProcessReadInput", Property: "stream", Values: append([]string{""}, sandboxapi.ProcessStreams...)},
		{Def: "CancelResult", Property: "state", Values: sandboxapi.CancelStates},
		{Def: "CleanupOutcome", Property: "outcome", Values: sandboxapi.CleanupOutcomes},
		{Def: "TaskResult", Property: "merge", Values: []string{sandboxapi.TaskMergeMerged, sandboxapi.TaskMergeConflict, sandboxapi.TaskMergeNotAccepted, sandboxapi.TaskMergeSkipped, sandboxapi.TaskMergeNoChanges, sandboxapi.TaskMergeFailed}},
	}
}

// namedEnums are the contract's named string types and their values.
func namedEnums() map[reflect.Type][]string {
	return map[reflect.Type][]string{
		reflect.TypeFor[sandboxapi.WorkspaceMode]():      strs([]sandboxapi.WorkspaceMode{sandboxapi.ModeAnalysis, sandboxapi.ModeEdit, sandboxapi.ModeTask}),
		reflect.TypeFor[sandboxapi.Network]():            strs([]sandboxapi.Network{sandboxapi.NetworkNone, sandboxapi.NetworkLimited, sandboxapi.NetworkDefault}),
		reflect.TypeFor[sandboxapi.EvictionActionKind](): strs(sandboxapi.EvictionActionKinds),
		reflect.TypeFor[sandboxapi.EvictionTier]():       strs(sandboxapi.EvictionTiers),
	}
}

// anys returns vals sorted, as JSON Schema enum values.
func anys(vals []string) []any {
	vals = slices.Clone(vals)
	sort.Strings(vals)
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	return out
}

// topKinds are the ErrorDetails.kind values: every kind below a family
// root, and the roots themselves.
func topKinds() []string {
	var out []string
	for _, k := range sandboxapi.Kinds() {
		if d := k.Details(); d.SubKind == "" {
			out = append(out, d.Kind)
		}
	}
	return out
}

func subKinds() []string {
	var out []string
	for _, k := range sandboxapi.Kinds() {
		if d := k.Details(); d.SubKind != "" {
			out = append(out, d.SubKind)
		}
	}
	return out
}

// applyEnums states each enum on its definition. An enum whose definition
// or property does not exist is an error, so renaming a type or field
// cannot silently drop one.
func applyEnums(defs jsonschema.Definitions) error {
	for _, e := range enums() {
		d, ok := defs[e.Def]
		if !ok {
			return fmt.Errorf("schema: enum for missing definition %s", e.Def)
		}
		target := d
		if e.Property != "" {
			p, ok := d.Properties.Get(e.Property)
			if !ok {
				return fmt.Errorf("schema: enum for missing property %s.%s", e.Def, e.Property)
			}
			target = p
			if target.Ref != "" {
				return fmt.Errorf("schema: enum for %s.%s, which is a reference", e.Def, e.Property)
			}
		}
		target.Enum = anys(e.Values)
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// applyNullable lets every field whose Go type is a pointer, slice, map
// or byte slice be null: without omitempty Go sends null when it is empty,
// and with omitempty the worker decodes null as "absent" (docs/API.md
// "Strict decoding": `"request": null` resumes a workspace, a fan-out's
// `"conversation": null`), so a client that writes the documented null
// passes the schema too (docs/API.md "Schema").
func applyNullable(defs jsonschema.Definitions, roots []reflect.Type) error {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeFor[sandboxapi.Handle]().PkgPath() {
			return nil
		}
		seen[t] = true
		d, ok := defs[t.Name()]
		if !ok {
			return fmt.Errorf("schema: no definition for %s", t)
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if err := walk(f.Type); err != nil {
				return err
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			switch f.Type.Kind() {
			case reflect.Slice, reflect.Map, reflect.Pointer:
			default:
				continue
			}
			p, ok := d.Properties.Get(name)
			if !ok {
				return fmt.Errorf("schema: no property %s.%s", t.Name(), name)
			}
			d.Properties.Set(name, &jsonschema.Schema{AnyOf: []*jsonschema.Schema{p, {Type: "null"}}, Description: p.Description})
			p.Description = ""
		}
		return nil
	}
	for _, t := range roots {
		if err := walk(t); err != nil {
			return err
		}
	}
	return nil
}
