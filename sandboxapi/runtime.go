package sandboxapi

import "time"

// PreviewURLInput is the preview_url update's argument (docs/API.md
// "Updates", "Preview URLs").
type PreviewURLInput struct {
	// Port is the TCP port (1–65535) a server listens on inside the runtime.
	Port int `json:"port"`
}

// MaxPort is the highest TCP port.
const MaxPort = 65535

// Validate checks the port: FieldError "port" (InvalidArgument) outside 1–MaxPort.
func (in PreviewURLInput) Validate() error {
	if in.Port < 1 || in.Port > MaxPort {
		return FieldError("port", "port %d is outside 1–%d", in.Port, MaxPort)
	}
	return nil
}

// PreviewURL is how to reach a port of the workspace's runtime from outside
// (the preview_url update's result; docs/API.md "Preview URLs").
type PreviewURL struct {
	// URL reaches the port (http or https).
	URL string `json:"url"`
	// Token, when set, must accompany each request the way the runtime's
	// backend says (Daytona: the x-daytona-preview-token header); empty when
	// the URL carries its own authorization (a signed URL) or needs none.
	Token string `json:"token,omitempty"`
	// ExpiresAt is when the URL stops working; nil: while the runtime runs.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// RuntimeReplica is the state of a remote runtime's replica of the
// workspace (Handle.RuntimeReplica, SessionDescription.RuntimeReplica;
// docs/API.md "Remote runtimes"): the workspace's host worktree is the
// source of truth, and a remote sandbox that vanished (deleted, expired,
// archived beyond recovery) is created again and re-synced from it on its
// next use, with nothing lost. Absent for local runtimes.
type RuntimeReplica struct {
	// Recreated counts the sandboxes that vanished and were created again
	// since the runtime was last destroyed on purpose.
	Recreated int `json:"recreated"`
	// LastRecreatedAt is when that last happened (nil: never).
	LastRecreatedAt *time.Time `json:"last_recreated_at,omitempty"`
	// Synced: the replica has been synced since its sandbox was (re)created.
	Synced bool `json:"synced"`
	// Files is the number of files the host and the replica last agreed on.
	Files int `json:"files"`
	// NotSynced lists paths the last sync could not bring back to the
	// workspace (nested git repositories made in the sandbox, at most 20):
	// they exist only in the sandbox and are lost if it is recreated.
	NotSynced []string `json:"not_synced,omitempty"`
	// Conflicts lists the open sync conflicts (oldest first, at most 50):
	// files changed both in the workspace and in the sandbox since they
	// last agreed. The workspace's version stays at Path; the sandbox's is
	// kept beside it at SandboxCopy (a new file of the workspace, listed by
	// status) until that file is removed; "" when the sandbox's version
	// was a deletion (then listed for a day).
	Conflicts []ReplicaConflict `json:"conflicts,omitempty"`
}

// ReplicaConflict is one sync conflict of a remote runtime's replica
// (RuntimeReplica.Conflicts; docs/API.md "Remote runtimes"): Path changed
// in the workspace and in the sandbox since they last agreed, and was
// never settled silently.
type ReplicaConflict struct {
	// Path is the file, relative to the workspace root; the workspace's
	// version (its content, or its deletion) stays there.
	Path string `json:"path"`
	// SandboxCopy is where the sandbox's version was kept: Path +
	// ".remote-conflict" (or "-2", "-3", … when taken); "" when the
	// sandbox deleted the file.
	SandboxCopy string `json:"sandbox_copy,omitempty"`
	// At is when the worker found it.
	At time.Time `json:"at"`
}
