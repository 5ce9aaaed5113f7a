package codecserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "codec-token")
	tok, err := EnsureTokenFile(path)
	require.NoError(t, err)
	assert.Len(t, tok, 64, "32 random bytes in hex")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, err := EnsureTokenFile(path)
	require.NoError(t, err)
	assert.Equal(t, tok, again, "an existing token is kept across restarts")

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	_, err = EnsureTokenFile(short)
	assert.ErrorContains(t, err, "at least 32 bytes", "a bad token file is not replaced")
	_, err = LoadToken(filepath.Join(dir, "none"))
	assert.ErrorContains(t, err, "no such file")

	lookup := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	got, src, err := TokenFromEnv(lookup(map[string]string{EnvTokenFile: path, EnvToken: strings.Repeat("z", 40)}))
	require.NoError(t, err)
	assert.Equal(t, tok, got, "the file wins")
	assert.Equal(t, EnvTokenFile, src)
	got, src, err = TokenFromEnv(lookup(map[string]string{EnvToken: " " + strings.Repeat("z", 40) + "\n"}))
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("z", 40), got)
	assert.Equal(t, EnvToken, src)
	_, _, err = TokenFromEnv(lookup(map[string]string{EnvToken: "short-secret"}))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "short-secret", "a token is never echoed")
	got, src, err = TokenFromEnv(lookup(nil))
	assert.NoError(t, err)
	assert.Empty(t, got)
	assert.Empty(t, src)
}
