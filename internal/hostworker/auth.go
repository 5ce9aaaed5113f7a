package hostworker

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/codehost"
	"github.com/sandboxcore/sandboxcore/internal/credentials"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// AuthConfig is the credential and code-host part of Config (docs/SECURITY.md "Credentials";
// README.md "Configuration" lists every variable).
type AuthConfig struct {
	// CredentialsDir holds one <user_id>.json per user (SANDBOX_GIT_CREDENTIALS_DIR).
	CredentialsDir string
	// GitHubAPIURL is the REST API base (SANDBOX_GITHUB_API_URL); "" = GitHub.com.
	GitHubAPIURL string
	// GitHubHost is the git host whose repositories that API serves
	// (SANDBOX_GITHUB_HOST); "" = github.com, or the API URL's host.
	GitHubHost string
	// GitHubAppID enables the GitHub App source (SANDBOX_GITHUB_APP_ID); 0 = off.
	GitHubAppID int64
	// GitHubAppKeyFile is the App's PEM private key (SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE).
	GitHubAppKeyFile string
	// GitHubAppInstallationID pins the installation (SANDBOX_GITHUB_APP_INSTALLATION_ID); 0 = per repository.
	GitHubAppInstallationID int64
	// AccessTTL is how long a successful access check is remembered
	// (SANDBOX_ACCESS_CHECK_TTL; default credentials.DefaultAccessTTL).
	AccessTTL time.Duration
}

// authFromEnv reads AuthConfig; allowHTTP is SANDBOX_ALLOW_HTTP_URLS (a plain
// http:// API URL would send tokens in clear). Errors are *ConfigError.
func authFromEnv(get func(name, def string) string, allowHTTP bool) (AuthConfig, error) {
	a := AuthConfig{
		CredentialsDir:   get("SANDBOX_GIT_CREDENTIALS_DIR", ""),
		GitHubAPIURL:     get("SANDBOX_GITHUB_API_URL", ""),
		GitHubHost:       strings.ToLower(get("SANDBOX_GITHUB_HOST", "")),
		GitHubAppKeyFile: get("SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE", ""),
	}
	if a.CredentialsDir != "" {
		if fi, err := os.Stat(a.CredentialsDir); err != nil || !fi.IsDir() {
			return a, &ConfigError{"SANDBOX_GIT_CREDENTIALS_DIR", a.CredentialsDir, "not a directory"}
		}
	}
	if a.GitHubAPIURL != "" {
		norm, err := codehost.APIBaseURL(a.GitHubAPIURL)
		if err != nil {
			return a, &ConfigError{"SANDBOX_GITHUB_API_URL", a.GitHubAPIURL, "want https://host[/api/v3]"}
		}
		if u, _ := url.Parse(norm); u.Scheme == "http" && !allowHTTP {
			return a, &ConfigError{"SANDBOX_GITHUB_API_URL", a.GitHubAPIURL, "http:// sends tokens in clear; use https (or SANDBOX_ALLOW_HTTP_URLS=1 for test servers)"}
		}
		a.GitHubAPIURL = norm
	}
	if a.GitHubHost != "" {
		if _, err := sandboxapi.ParseRepoURL("https://"+a.GitHubHost+"/o/r.git", sandboxapi.URLPolicy{}); err != nil {
			return a, &ConfigError{"SANDBOX_GITHUB_HOST", a.GitHubHost, "want host[:port]"}
		}
	}
	for _, n := range []struct {
		name string
		dst  *int64
	}{{"SANDBOX_GITHUB_APP_ID", &a.GitHubAppID}, {"SANDBOX_GITHUB_APP_INSTALLATION_ID", &a.GitHubAppInstallationID}} {
		if v := get(n.name, ""); v != "" {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return a, &ConfigError{n.name, v, "want a positive integer"}
			}
			*n.dst = id
		}
	}
	if a.GitHubAppID != 0 && a.GitHubAppKeyFile == "" {
		return a, &ConfigError{"SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE", "", "required with SANDBOX_GITHUB_APP_ID"}
	}
	if a.GitHubAppID == 0 && (a.GitHubAppKeyFile != "" || a.GitHubAppInstallationID != 0) {
		return a, &ConfigError{"SANDBOX_GITHUB_APP_ID", "", "required with SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE / SANDBOX_GITHUB_APP_INSTALLATION_ID"}
	}
	v := get("SANDBOX_ACCESS_CHECK_TTL", credentials.DefaultAccessTTL.String())
	ttl, err := sandbox.ParseDuration(v)
	if err != nil || ttl < 0 {
		return a, &ConfigError{"SANDBOX_ACCESS_CHECK_TTL", v, "want a duration such as 2m, or a number of seconds (0 = check every acquire)"}
	}
	a.AccessTTL = ttl
	if ttl == 0 {
		a.AccessTTL = -1 // credentials.Access: negative disables remembering
	}
	return a, nil
}

// hosts returns the configured git hosts of the GitHub API (nil = its default).
func (a AuthConfig) hosts() []string {
	if a.GitHubHost == "" {
		return nil
	}
	return []string{a.GitHubHost}
}

// authPorts are the credential-side ports of a host.
type authPorts struct {
	creds    sandbox.CredentialProvider
	remote   sandbox.RemoteGit
	access   sandbox.AccessVerifier
	codeHost sandbox.CodeHost
}

// buildAuth wires the credential chain: per-user directory, then
// the credentials file, then the GitHub App, then GITHUB_TOKEN/GH_TOKEN;
// override replaces the chain (tests, embedding). It also builds the remote
// git side, the access verifier and the GitHub code host.
func buildAuth(cfg Config, git *gitx.Runner, override sandbox.CredentialProvider) (authPorts, error) {
	a := cfg.Auth
	p := authPorts{creds: override, remote: &gitx.Remote{Git: git}}
	if p.creds == nil {
		chain := credentials.Chain{}
		if a.CredentialsDir != "" {
			chain = append(chain, &credentials.Dir{Path: a.CredentialsDir})
		}
		if cfg.CredentialsFile != "" {
			chain = append(chain, &credentials.File{Path: cfg.CredentialsFile})
		}
		if a.GitHubAppID != 0 {
			key, err := os.ReadFile(a.GitHubAppKeyFile)
			if err != nil {
				return p, &ConfigError{"SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE", a.GitHubAppKeyFile, "unreadable: " + errText(err)}
			}
			app, err := credentials.NewGitHubApp(credentials.GitHubAppOptions{AppID: a.GitHubAppID, PrivateKeyPEM: key,
				InstallationID: a.GitHubAppInstallationID, APIURL: a.GitHubAPIURL, Hosts: a.hosts()})
			if err != nil {
				return p, &ConfigError{"SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE", a.GitHubAppKeyFile, sandboxapi.Message(err)}
			}
			chain = append(chain, app)
		}
		p.creds = append(chain, credentials.Env{})
	}
	p.access = &credentials.Access{Remote: p.remote, TTL: a.AccessTTL}
	gh, err := codehost.New(codehost.Options{APIURL: a.GitHubAPIURL, Hosts: a.hosts()})
	if err != nil {
		return p, &ConfigError{"SANDBOX_GITHUB_API_URL", a.GitHubAPIURL, sandboxapi.Message(err)}
	}
	p.codeHost = gh
	return p, nil
}

// secretPaths are the credential files a runtime must never see.
func (a AuthConfig) secretPaths() []string {
	var out []string
	for _, p := range []string{a.CredentialsDir, a.GitHubAppKeyFile} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	return out
}

func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return fmt.Sprint(err)
}
