package gitx

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// authHeader returns the Authorization header and the URL it is scoped to
// (http.<scope>.extraHeader): the remote URL itself, without user info, query
// or fragment. It is never sent to another host or repository, and no
// repository configuration can be more specific for that URL (git's urlmatch:
// the most specific http.<url>.* wins, ties go to the last definition, which
// is this one).
func authHeader(cred *sandbox.Credential, remote string) (header, scope string, err error) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("gitx: credentials need an http(s) remote URL without user info, query or fragment")
	}
	if strings.ContainsAny(cred.Username+cred.Secret, "\r\n\x00") {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "credential contains a line break or NUL")
	}
	basic := base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Secret))
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return "Authorization: Basic " + basic, u.Scheme + "://" + u.Host + path, nil
}

// secretForms are the spellings of a credential that must never appear in
// output: raw, URL-encoded, and the basic-auth base64.
func secretForms(c *sandbox.Credential) []string {
	if c == nil || c.Secret == "" {
		return nil
	}
	return []string{
		base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Secret)),
		c.Secret,
		url.QueryEscape(c.Secret),
		url.PathEscape(c.Secret),
	}
}

func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "<redacted>")
		}
	}
	return s
}

func redactAll(args, secrets []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a, secrets)
	}
	return out
}
