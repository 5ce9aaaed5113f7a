// Package sandbox holds the worker's side of the model: the ports the
// workflows' activities drive (RepoCacheProvider, WorkspaceProvider,
// RuntimeProvider and Runtime, ProcessRuntime, Store, CredentialProvider,
// RemoteGit, CodeHost, BranchMerger, LifecycleProvider) and the records they
// exchange that never cross the wire to a client (RepoCache, RuntimeSpec,
// RuntimeRecord, Mount, Credential, WorkspaceBackup, ForkManifest, the
// host's refs under refs/sandbox/).
//
// What a client sends or receives — requests, results, error kinds,
// validation rules — is package sandboxapi; code here names those types
// sandboxapi.X, never through a second name. Adapters implement these ports
// (internal/repocache, internal/workspace, internal/runtime/..., internal/store,
// internal/codehost); package activities wires them (docs/DESIGN.md "Ports", "Layout").
package sandbox
