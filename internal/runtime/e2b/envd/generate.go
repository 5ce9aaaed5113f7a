// Package envd holds the Connect RPC code of envd, the daemon inside every
// E2B sandbox, generated with buf (protoc-gen-go and protoc-gen-connect-go)
// from spec/envd/process/process.proto and spec/envd/filesystem/filesystem.proto
// (unmodified copies, spec/README.md): packages process and filesystem (the
// messages) and processconnect and filesystemconnect (clients and handlers).
// Regenerate with `go generate ./internal/runtime/e2b/...`.
package envd

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate --template buf.gen.yaml ../spec/envd
