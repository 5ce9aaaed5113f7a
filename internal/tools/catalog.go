package tools

import (
	"bytes"
	"encoding/json"
)

// CatalogFile is the file in docs/schema/ holding Catalog's output
// (docs/API.md "Schema"): the tool definitions other implementations of
// this surface load (python/: sandboxcore.pydantic_ai), so that one
// definition of each tool's name, description, input schema and
// annotations serves every framework.
const CatalogFile = "tools.json"

// CatalogEntry is one tool as Catalog lists it: its MCP declaration
// without the output schema.
type CatalogEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema any    `json:"inputSchema"`
	Annotations any    `json:"annotations,omitempty"`
}

// Catalog returns the tool sets of Tools for each capability set a
// workspace can have, as indented JSON: {"read_only": [...], "writable":
// [...], "writable_code_host": [...]}, each a list of CatalogEntry in the
// order the server installs them. Errors: none in practice (a schema that
// does not marshal).
func Catalog() ([]byte, error) {
	sets := []struct {
		name string
		caps Caps
	}{
		{"read_only", Caps{Known: true}},
		{"writable", Caps{Known: true, Writable: true}},
		{"writable_code_host", Caps{Known: true, Writable: true, CodeHost: true}},
	}
	out := map[string][]CatalogEntry{}
	for _, s := range sets {
		entries := []CatalogEntry{}
		for _, t := range Tools(s.caps) {
			entries = append(entries, CatalogEntry{Name: t.Def.Name, Description: t.Def.Description, InputSchema: t.Def.InputSchema, Annotations: t.Def.Annotations})
		}
		out[s.name] = entries
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Names returns the names of the tools Tools(caps) offers, in its order;
// Names(AllCaps) is every tool of the surface.
func Names(caps Caps) []string {
	var out []string
	for _, t := range Tools(caps) {
		out = append(out, t.Def.Name)
	}
	return out
}

// AllCaps are the capabilities of a workspace that gets every tool: known,
// writable, with a code host.
var AllCaps = Caps{Known: true, Writable: true, CodeHost: true}
