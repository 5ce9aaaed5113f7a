package hostworker

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// DaytonaConfig is the Daytona part of Config, read only with
// SANDBOX_RUNTIME_PROVIDER=daytona (README "Configuration", the DAYTONA_*
// rows; docs/SECURITY.md "Remote runtimes").
type DaytonaConfig struct {
	// APIURL is Daytona's API (DAYTONA_API_URL), e.g. https://app.daytona.io/api;
	// http:// only with SANDBOX_ALLOW_HTTP_URLS=1 (the key would travel in clear).
	APIURL string
	// APIKey authenticates every call (DAYTONA_API_KEY, or the first line of
	// DAYTONA_API_KEY_FILE). It is never logged: String and the slog value
	// of a DaytonaConfig redact it, and it goes nowhere but the
	// Authorization header of Daytona's own requests.
	APIKey string
	// APIKeyFile is where APIKey was read from ("" = DAYTONA_API_KEY).
	APIKeyFile string
	// Snapshot or Image (DAYTONA_SNAPSHOT, DAYTONA_IMAGE; at most one) is
	// what sandboxes are made from; neither: Daytona's default snapshot.
	Snapshot, Image string
	// Target is the Daytona region (DAYTONA_TARGET; "" = the organization's default).
	Target string
	// AutoStopMinutes and AutoArchiveMinutes (DAYTONA_AUTO_STOP_MINUTES,
	// DAYTONA_AUTO_ARCHIVE_MINUTES) are Daytona's own timers on every
	// sandbox: it stops one unused this long, and archives one stopped this
	// long. They are the safety net when no worker is left to hibernate a
	// sandbox (sessions hibernate after SANDBOX_IDLE_STOP themselves).
	AutoStopMinutes, AutoArchiveMinutes int
}

// Defaults of the Daytona variables (the runtime's own, internal/runtime/daytona).
const (
	DefaultDaytonaAutoStopMinutes    = 15
	DefaultDaytonaAutoArchiveMinutes = 60
	// maxDaytonaMinutes bounds both timers (30 days).
	maxDaytonaMinutes = 30 * 24 * 60
)

// String never prints the API key.
func (d DaytonaConfig) String() string {
	key := "<unset>"
	if d.APIKey != "" {
		key = "<redacted>"
	}
	return fmt.Sprintf("daytona(api=%s key=%s snapshot=%q image=%q target=%q auto_stop=%dm auto_archive=%dm)",
		d.APIURL, key, d.Snapshot, d.Image, d.Target, d.AutoStopMinutes, d.AutoArchiveMinutes)
}

// GoString never prints the API key either.
func (d DaytonaConfig) GoString() string { return d.String() }

var (
	// imageRE is a Docker image reference: it is written into a Dockerfile's
	// FROM line, so no whitespace or control character may get through.
	imageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	// snapshotRE is a Daytona snapshot name (or an image reference used as one).
	snapshotRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	targetRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// keyRE: printable ASCII without spaces (an HTTP header value).
	keyRE = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

// daytonaFromEnv reads the DAYTONA_* variables; allowHTTP is
// SANDBOX_ALLOW_HTTP_URLS. Errors are *ConfigError naming the variable, and
// never quote the key.
func daytonaFromEnv(get func(name, def string) string, allowHTTP bool) (DaytonaConfig, error) {
	d := DaytonaConfig{
		APIURL:   strings.TrimRight(get("DAYTONA_API_URL", ""), "/"),
		Snapshot: get("DAYTONA_SNAPSHOT", ""),
		Image:    get("DAYTONA_IMAGE", ""),
		Target:   get("DAYTONA_TARGET", ""),
	}
	if d.APIURL == "" {
		return d, &ConfigError{"DAYTONA_API_URL", "", "required with SANDBOX_RUNTIME_PROVIDER=daytona (e.g. https://app.daytona.io/api)"}
	}
	u, err := url.Parse(d.APIURL)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return d, &ConfigError{"DAYTONA_API_URL", d.APIURL, "want https://host[/path] (no credentials, query or fragment)"}
	}
	if u.Scheme == "http" && !allowHTTP {
		return d, &ConfigError{"DAYTONA_API_URL", d.APIURL, "http:// sends the API key in clear; use https (or SANDBOX_ALLOW_HTTP_URLS=1 for test servers)"}
	}
	key, file := get("DAYTONA_API_KEY", ""), get("DAYTONA_API_KEY_FILE", "")
	switch {
	case key != "" && file != "":
		return d, &ConfigError{"DAYTONA_API_KEY_FILE", file, "set DAYTONA_API_KEY or DAYTONA_API_KEY_FILE, not both"}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return d, &ConfigError{"DAYTONA_API_KEY_FILE", file, "cannot read it: " + errText(err)}
		}
		key, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		key = strings.TrimSpace(key)
		if key == "" {
			return d, &ConfigError{"DAYTONA_API_KEY_FILE", file, "the file is empty"}
		}
		if !validKey(key) {
			return d, &ConfigError{"DAYTONA_API_KEY_FILE", file, "its first line is not an API key (8 to 4096 printable characters, no spaces)"}
		}
		d.APIKeyFile = file
	case key != "":
		if !validKey(key) {
			return d, &ConfigError{"DAYTONA_API_KEY", "<set>", "not an API key (8 to 4096 printable characters, no spaces)"}
		}
	default:
		return d, &ConfigError{"DAYTONA_API_KEY", "", "required with SANDBOX_RUNTIME_PROVIDER=daytona (or DAYTONA_API_KEY_FILE)"}
	}
	d.APIKey = key
	if d.Snapshot != "" && d.Image != "" {
		return d, &ConfigError{"DAYTONA_IMAGE", d.Image, "set DAYTONA_SNAPSHOT or DAYTONA_IMAGE, not both"}
	}
	if d.Snapshot != "" && !snapshotRE.MatchString(d.Snapshot) {
		return d, &ConfigError{"DAYTONA_SNAPSHOT", d.Snapshot, "want a snapshot name ([A-Za-z0-9._/:@+-], at most 255)"}
	}
	if d.Image != "" && !imageRE.MatchString(d.Image) {
		return d, &ConfigError{"DAYTONA_IMAGE", d.Image, "want an image reference such as ubuntu:24.04 ([A-Za-z0-9._/:@+-], at most 255)"}
	}
	if d.Target != "" && !targetRE.MatchString(d.Target) {
		return d, &ConfigError{"DAYTONA_TARGET", d.Target, "want a region name such as us or eu"}
	}
	for _, m := range []struct {
		name string
		dst  *int
		def  int
	}{
		{"DAYTONA_AUTO_STOP_MINUTES", &d.AutoStopMinutes, DefaultDaytonaAutoStopMinutes},
		{"DAYTONA_AUTO_ARCHIVE_MINUTES", &d.AutoArchiveMinutes, DefaultDaytonaAutoArchiveMinutes},
	} {
		v := get(m.name, strconv.Itoa(m.def))
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxDaytonaMinutes {
			return d, &ConfigError{m.name, v, fmt.Sprintf("want a whole number of minutes from 1 to %d (0, Daytona's \"never\", is refused: a sandbox whose worker is gone would run on)", maxDaytonaMinutes)}
		}
		*m.dst = n
	}
	return d, nil
}

// validKey: 8 to 4096 printable ASCII characters without spaces (an HTTP header value).
func validKey(k string) bool { return len(k) >= 8 && len(k) <= 4096 && keyRE.MatchString(k) }
