// Package workflows holds sandboxcore's Temporal workflows: SessionWorkflow
// (one per workspace), EvictionCronWorkflow and TaskFanoutWorkflow. Their
// public contract — workflow types, id scheme, update/signal/query names and
// every payload — is package sandboxapi (docs/API.md); activity names and
// payloads are worker-private (internal/wire).
//
// Workflow code here is deterministic: it does no I/O and imports no adapter;
// all work happens in activities (package activities) reached by name.
package workflows
