package credentials_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/codehost/githubtest"
	"github.com/sandboxcore/sandboxcore/internal/credentials"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestGitHubAppMintsRepositoryScopedInstallationTokens(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh := githubtest.New(t)
	gh.SetApp(githubtest.App{ID: 4242, PublicKey: &key.PublicKey})
	branch := func(string) (string, bool) { return "", false }
	gh.AddRepo(githubtest.Repo{Owner: "acme", Name: "app", DefaultBranch: "main", Branch: branch, InstallationID: 77})
	gh.AddRepo(githubtest.Repo{Owner: "acme", Name: "other", DefaultBranch: "main", Branch: branch})

	u, err := url.Parse(gh.URL())
	require.NoError(t, err)
	app, err := credentials.NewGitHubApp(credentials.GitHubAppOptions{AppID: 4242, PrivateKeyPEM: keyPEM, APIURL: gh.URL(), Hosts: []string{"git.acme.test"}})
	require.NoError(t, err)
	ctx := context.Background()
	repo := func(name string) sandbox.AuthScope {
		return sandbox.AuthScope{UserID: "alice", Repo: sandboxapi.RepoIdentity{Host: "git.acme.test", Owner: "acme", Name: name, URL: "https://git.acme.test/acme/" + name + ".git"}}
	}

	c, err := app.Credential(ctx, repo("app"))
	require.NoError(t, err)
	require.NotNil(t, c)
	assert.Equal(t, "x-access-token", c.Username)
	assert.True(t, strings.HasPrefix(c.Secret, "ghs_fakeinstallation77"), c.Secret)
	again, err := app.Credential(ctx, repo("app"))
	require.NoError(t, err)
	assert.Equal(t, c.Secret, again.Secret, "the token is cached until it nears expiry")

	c, err = app.Credential(ctx, repo("other"))
	require.NoError(t, err)
	assert.Nil(t, c, "not installed: the chain goes on")
	c, err = app.Credential(ctx, sandbox.AuthScope{UserID: "alice", Repo: sandboxapi.RepoIdentity{Host: u.Host, Owner: "acme", Name: "app"}})
	require.NoError(t, err)
	assert.Nil(t, c, "a host the App does not serve")

	var mints []githubtest.Request
	for _, r := range gh.Requests() {
		if strings.HasSuffix(r.Path, "/access_tokens") {
			mints = append(mints, r)
		}
	}
	require.Len(t, mints, 1)
	assert.Equal(t, "/app/installations/77/access_tokens", mints[0].Path)
	var body struct {
		Repositories []string `json:"repositories"`
	}
	require.NoError(t, json.Unmarshal(mints[0].Body, &body))
	assert.Equal(t, []string{"app"}, body.Repositories, "the token is scoped to the one repository")

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	bad, err := credentials.NewGitHubApp(credentials.GitHubAppOptions{AppID: 4242, APIURL: gh.URL(), Hosts: []string{"git.acme.test"},
		PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})})
	require.NoError(t, err)
	_, err = bad.Credential(ctx, repo("app"))
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, "a key GitHub does not accept")

	_, err = credentials.NewGitHubApp(credentials.GitHubAppOptions{AppID: 1, PrivateKeyPEM: []byte("not a key")})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}
