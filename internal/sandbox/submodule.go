package sandbox

import (
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"strings"
)

// Submodule is one gitlink of a workspace's index (docs/API.md
// "Submodules"), as the workspace provider lists it for the acquire
// activity, which fetches and checks it out.
type Submodule struct {
	// Path is the gitlink's path in the superproject.
	Path string
	// Name is its name in .gitmodules ("" when .gitmodules has no entry).
	Name string
	// URL is its URL as .gitmodules gives it (possibly relative; hostile:
	// resolve it with ResolveSubmoduleURL, then check it with ParseRepoURL).
	URL string
	// Commit is the commit the superproject records.
	Commit string
	// CheckedOut reports whether that commit is checked out at Path.
	CheckedOut bool
}

// ResolveSubmoduleURL resolves a .gitmodules URL against the
// superproject's URL as git does: "./x" and "../x" are relative to the
// superproject's URL taken as a directory (each "../" drops one path
// segment of it); anything else is returned as it is. The result still has
// to pass sandbox.ParseRepoURL. Errors: ErrInvalidArgument (a relative URL
// climbing above the host, or an empty one).
func ResolveSubmoduleURL(super, rel string) (string, error) {
	if rel == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "the submodule has no URL in .gitmodules")
	}
	if !strings.HasPrefix(rel, "./") && !strings.HasPrefix(rel, "../") {
		return rel, nil
	}
	base := strings.TrimSuffix(super, "/")
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "relative submodule URL %q needs a URL-form superproject", sandboxapi.Clip(rel, 200))
	}
	host, p, _ := strings.Cut(rest, "/")
	segs := strings.Split(p, "/")
	for {
		switch {
		case strings.HasPrefix(rel, "./"):
			rel = rel[2:]
			continue
		case strings.HasPrefix(rel, "../"):
			if len(segs) == 0 || (len(segs) == 1 && segs[0] == "") {
				return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "relative submodule URL climbs above the host")
			}
			segs = segs[:len(segs)-1]
			rel = rel[3:]
			continue
		}
		break
	}
	out := scheme + "://" + host
	if j := strings.Join(segs, "/"); j != "" {
		out += "/" + j
	}
	return out + "/" + rel, nil
}
