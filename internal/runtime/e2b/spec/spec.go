// Package spec embeds the unmodified E2B specifications the E2B runtime's
// clients are generated from (README.md beside this file names their
// origin): the control-plane OpenAPI document and envd's HTTP OpenAPI
// document, which the fake validates requests and responses against.
package spec

import _ "embed"

// OpenAPI is openapi.yml, E2B's control-plane REST API.
//
//go:embed openapi.yml
var OpenAPI []byte

// EnvdOpenAPI is envd/envd.yaml, envd's HTTP API inside a sandbox.
//
//go:embed envd/envd.yaml
var EnvdOpenAPI []byte
