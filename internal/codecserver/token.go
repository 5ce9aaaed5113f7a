package codecserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Environment variables of the codec server's token (README.md
// "Configuration"): a file holding it, or the token itself.
const (
	EnvTokenFile = "SANDBOX_CODEC_TOKEN_FILE"
	EnvToken     = "SANDBOX_CODEC_TOKEN"
)

// LoadToken reads a token file (surrounding white space ignored). Errors: an
// unreadable file, or a token shorter than MinTokenLength; never the token.
func LoadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token file: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenLength {
		return "", fmt.Errorf("token file %s: the token must be at least %d bytes (e.g. `openssl rand -hex 32 > %s`)", path, MinTokenLength, path)
	}
	return tok, nil
}

// TokenFromEnv returns the token of SANDBOX_CODEC_TOKEN_FILE, else of
// SANDBOX_CODEC_TOKEN, and the variable it came from; "" and no error when
// neither is set. Errors name the variable, never the token.
func TokenFromEnv(lookup func(string) (string, bool)) (token, source string, err error) {
	if p, ok := lookup(EnvTokenFile); ok && p != "" {
		tok, err := LoadToken(p)
		if err != nil {
			return "", EnvTokenFile, fmt.Errorf("%s: %v", EnvTokenFile, err)
		}
		return tok, EnvTokenFile, nil
	}
	if tok, ok := lookup(EnvToken); ok && tok != "" {
		tok = strings.TrimSpace(tok)
		if len(tok) < MinTokenLength {
			return "", EnvToken, fmt.Errorf("%s: the token must be at least %d bytes", EnvToken, MinTokenLength)
		}
		return tok, EnvToken, nil
	}
	return "", "", nil
}

// EnsureTokenFile returns the token in path, first writing a new random one
// (32 bytes, hex; file mode 0600) when the file does not exist.
func EnsureTokenFile(path string) (string, error) {
	tok, err := LoadToken(path)
	if err == nil {
		return tok, nil
	}
	if _, serr := os.Stat(path); !errors.Is(serr, fs.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok = hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("token file: %v", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("token file: %v", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("token file: %v", err)
	}
	return tok, nil
}
