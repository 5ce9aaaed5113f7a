package payloadcodec

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
)

// EnvKeys is the environment variable that lists the keys:
// ID=FILE[,ID=FILE…], the first one encrypting (README.md "Configuration").
const EnvKeys = "SANDBOX_PAYLOAD_KEYS"

// maxKeyFile bounds what is read from a key file: a key is 32 bytes raw or 44
// characters of base64 (plus a line end).
const maxKeyFile = 4096

// KeysError reports a malformed SANDBOX_PAYLOAD_KEYS entry or key file. It
// never holds key material.
type KeysError struct {
	Entry  string // the ID=FILE entry as written ("" for the whole value)
	Reason string
}

// Error renders "SANDBOX_PAYLOAD_KEYS: entry \"ID=FILE\": reason".
func (e *KeysError) Error() string {
	if e.Entry == "" {
		return EnvKeys + ": " + e.Reason
	}
	return fmt.Sprintf("%s: entry %q: %s", EnvKeys, e.Entry, e.Reason)
}

// LoadKeys reads the keys a SANDBOX_PAYLOAD_KEYS value names: comma-separated
// ID=FILE entries (spaces around entries are ignored), each FILE holding
// exactly 32 bytes, either raw or base64 (standard or URL alphabet, padded or
// not, surrounding white space ignored). The first key encrypts. Errors:
// *KeysError naming the entry (an unreadable file, a wrong size, a bad or
// repeated id).
func LoadKeys(spec string) ([]Key, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, &KeysError{Reason: "empty: want ID=FILE[,ID=FILE…]"}
	}
	var keys []Key
	seen := map[string]bool{}
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		id, file, ok := strings.Cut(entry, "=")
		if !ok || id == "" || file == "" {
			return nil, &KeysError{entry, "want ID=FILE"}
		}
		if !keyIDPattern.MatchString(id) {
			return nil, &KeysError{entry, "the id must be 1 to 64 characters from A-Z a-z 0-9 . _ - (starting with a letter or digit)"}
		}
		if seen[id] {
			return nil, &KeysError{entry, "the id appears twice"}
		}
		seen[id] = true
		secret, err := readKeyFile(file)
		if err != nil {
			return nil, &KeysError{entry, err.Error()}
		}
		k, err := NewKey(id, secret)
		clear(secret)
		if err != nil {
			return nil, &KeysError{entry, strings.TrimPrefix(err.Error(), "payloadcodec: ")}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %v", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file: %v", err)
	}
	defer clear(raw)
	if len(raw) > maxKeyFile {
		return nil, fmt.Errorf("key file is larger than %d bytes: want 32 random bytes, raw or base64", maxKeyFile)
	}
	if len(raw) == KeySize {
		return bytes.Clone(raw), nil
	}
	text := string(bytes.TrimSpace(raw))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if d, err := enc.DecodeString(text); err == nil && len(d) == KeySize {
			return d, nil
		}
	}
	return nil, fmt.Errorf("key file holds %d bytes: want exactly 32 random bytes, raw or base64 (e.g. `head -c 32 /dev/urandom | base64 > FILE`)", len(raw))
}

// FromEnv builds the Codec SANDBOX_PAYLOAD_KEYS describes, reading it with
// lookup (usually os.LookupEnv). It returns nil and no error when the variable
// is unset or empty: payloads then stay plaintext. Errors: *KeysError.
func FromEnv(lookup func(string) (string, bool)) (*Codec, error) {
	spec, ok := lookup(EnvKeys)
	if !ok || strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	keys, err := LoadKeys(spec)
	if err != nil {
		return nil, err
	}
	return New(keys...)
}
