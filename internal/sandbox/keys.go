package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RepoCacheIDFor returns the stable id of the repo cache of repo on the worker
// host hostID: "rc-" + the first 24 hex digits of sha256(hostID NUL
// repo.Key()). Each host keeps its own mirror, so each has its own row.
func RepoCacheIDFor(hostID string, repo sandboxapi.RepoIdentity) string {
	sum := sha256.Sum256([]byte(hostID + "\x00" + repo.Key()))
	return "rc-" + hex.EncodeToString(sum[:])[:24]
}
