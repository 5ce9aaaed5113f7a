// Package temporalconn turns the Temporal SDK's environment configuration
// (go.temporal.io/sdk/contrib/envconfig: TOML profiles from
// TEMPORAL_CONFIG_FILE/TEMPORAL_PROFILE, then TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, …) into client options
// for the worker, sandboxctl and sandboxclient alike, adding what envconfig
// leaves out: certificates re-read when their files change (rotation), errors
// that name the variable (or flag, or profile key) a bad setting came from,
// and secrets that are never printed. Nothing here parses the variables or
// the TOML itself: envconfig does (docs/SECURITY.md "Connecting to Temporal").
package temporalconn

import (
	"fmt"
	"net"
	"os"
	"strings"

	"go.temporal.io/sdk/contrib/envconfig"
)

// DefaultNamespace is the namespace when nothing names one.
const DefaultNamespace = "default"

// Overrides are settings given on a command line (sandboxctl's flags, named
// like the Temporal CLI's); a non-empty field wins over the environment and
// the profile.
type Overrides struct {
	ConfigFile                 string // --config-file (else TEMPORAL_CONFIG_FILE)
	Profile                    string // --profile (else TEMPORAL_PROFILE)
	Address                    string // --address
	Namespace                  string // --namespace
	APIKey                     string // --api-key
	TLS                        *bool  // --tls
	TLSCertPath, TLSCertData   string // --tls-cert-path, --tls-cert-data
	TLSKeyPath, TLSKeyData     string // --tls-key-path, --tls-key-data
	TLSCAPath, TLSCAData       string // --tls-ca-path, --tls-ca-data
	TLSServerName              string // --tls-server-name
	TLSDisableHostVerification *bool  // --tls-disable-host-verification
}

// setting names where one value can come from: its environment variable,
// its sandboxctl flag and its key in a TOML profile.
type setting struct{ env, flag, toml string }

var (
	sAddress    = setting{"TEMPORAL_ADDRESS", "--address", "address"}
	sNamespace  = setting{"TEMPORAL_NAMESPACE", "--namespace", "namespace"}
	sAPIKey     = setting{"TEMPORAL_API_KEY", "--api-key", "api_key"}
	sTLS        = setting{"TEMPORAL_TLS", "--tls", "tls.disabled"}
	sCertPath   = setting{"TEMPORAL_TLS_CLIENT_CERT_PATH", "--tls-cert-path", "tls.client_cert_path"}
	sCertData   = setting{"TEMPORAL_TLS_CLIENT_CERT_DATA", "--tls-cert-data", "tls.client_cert_data"}
	sKeyPath    = setting{"TEMPORAL_TLS_CLIENT_KEY_PATH", "--tls-key-path", "tls.client_key_path"}
	sKeyData    = setting{"TEMPORAL_TLS_CLIENT_KEY_DATA", "--tls-key-data", "tls.client_key_data"}
	sCAPath     = setting{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "--tls-ca-path", "tls.server_ca_cert_path"}
	sCAData     = setting{"TEMPORAL_TLS_SERVER_CA_CERT_DATA", "--tls-ca-data", "tls.server_ca_cert_data"}
	sServerName = setting{"TEMPORAL_TLS_SERVER_NAME", "--tls-server-name", "tls.server_name"}
	sNoVerify   = setting{"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "--tls-disable-host-verification", "tls.disable_host_verification"}
	sAuthority  = setting{"TEMPORAL_CLIENT_AUTHORITY", "", "authority"}
)

// Settings is one resolved Temporal client profile: a TOML profile (if any)
// with the environment applied over it by envconfig, then Overrides. It holds
// secrets (an API key, a client key) and never prints them: Settings
// implements fmt.Formatter.
type Settings struct {
	profile     envconfig.ClientConfigProfile
	fromFlag    map[setting]bool
	fromEnv     map[setting]bool
	file        string // the TOML file consulted, for messages
	profileName string
	// requireTLS: the server is known to speak TLS (the embedded server with
	// SANDBOX_TEMPORAL_TLS_CERT), so TLS is on even when nothing enables it.
	requireTLS bool
}

// LoadError reports a setting that cannot be used; Source names the
// environment variable, flag or profile key it came from.
type LoadError struct {
	Source string
	Reason string
}

// Error renders "SOURCE: reason".
func (e *LoadError) Error() string { return e.Source + ": " + e.Reason }

// Load resolves the profile: envconfig loads the TOML file (o.ConfigFile, else
// TEMPORAL_CONFIG_FILE, else envconfig's default ~/.config/temporalio/temporal.toml;
// a missing file is no error) and its profile (o.Profile, else
// TEMPORAL_PROFILE, else "default"), applies the TEMPORAL_* variables that
// lookup (usually os.LookupEnv) finds, and then o. Errors: *LoadError naming
// the file, profile or setting.
func Load(lookup func(string) (string, bool), o Overrides) (*Settings, error) {
	env := lookupEnv(lookup)
	s := &Settings{fromFlag: map[setting]bool{}, fromEnv: map[setting]bool{}}
	s.file = o.ConfigFile
	if s.file == "" {
		s.file, _ = lookup("TEMPORAL_CONFIG_FILE")
	}
	fileSource := "TEMPORAL_CONFIG_FILE"
	if o.ConfigFile != "" {
		fileSource = "--config-file"
	} else if s.file == "" {
		s.file, fileSource = envconfig.DefaultConfigFilePath(), "the Temporal CLI's config file"
	}
	s.profileName = o.Profile
	if s.profileName == "" {
		s.profileName, _ = lookup("TEMPORAL_PROFILE")
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		ConfigFilePath: s.file, ConfigFileProfile: s.profileName, EnvLookup: env,
	})
	if err != nil {
		src := fileSource + " (" + s.file + ")"
		if s.profileName != "" && strings.Contains(err.Error(), "profile") {
			src = "TEMPORAL_PROFILE/--profile " + s.profileName
		}
		return nil, &LoadError{src, err.Error()}
	}
	if s.profileName == "" {
		s.profileName = envconfig.DefaultConfigFileProfile
	}
	s.profile = prof
	for _, st := range []setting{sAddress, sNamespace, sAPIKey, sTLS, sCertPath, sCertData, sKeyPath, sKeyData, sCAPath, sCAData, sServerName, sNoVerify, sAuthority} {
		if _, ok := lookup(st.env); ok {
			s.fromEnv[st] = true
		}
	}
	s.apply(o)
	if s.profile.Namespace == "" {
		s.profile.Namespace = DefaultNamespace
	}
	return s, s.check()
}

func (s *Settings) apply(o Overrides) {
	p := &s.profile
	tls := func() *envconfig.ClientConfigTLS {
		if p.TLS == nil {
			p.TLS = &envconfig.ClientConfigTLS{}
		}
		return p.TLS
	}
	str := func(st setting, v string, dst func() *string) {
		if v != "" {
			*dst() = v
			s.fromFlag[st] = true
		}
	}
	data := func(st setting, v string, dst func() *[]byte) {
		if v != "" {
			*dst() = []byte(v)
			s.fromFlag[st] = true
		}
	}
	str(sAddress, o.Address, func() *string { return &p.Address })
	str(sNamespace, o.Namespace, func() *string { return &p.Namespace })
	str(sAPIKey, o.APIKey, func() *string { return &p.APIKey })
	if o.TLS != nil {
		tls().Disabled = !*o.TLS
		s.fromFlag[sTLS] = true
	}
	// A path given on the command line replaces data from the environment or
	// the profile, and the other way round (they are mutually exclusive).
	if o.TLSCertPath != "" {
		tls().ClientCertData = nil
	}
	if o.TLSCertData != "" {
		tls().ClientCertPath = ""
	}
	if o.TLSKeyPath != "" {
		tls().ClientKeyData = nil
	}
	if o.TLSKeyData != "" {
		tls().ClientKeyPath = ""
	}
	if o.TLSCAPath != "" {
		tls().ServerCACertData = nil
	}
	if o.TLSCAData != "" {
		tls().ServerCACertPath = ""
	}
	str(sCertPath, o.TLSCertPath, func() *string { return &tls().ClientCertPath })
	data(sCertData, o.TLSCertData, func() *[]byte { return &tls().ClientCertData })
	str(sKeyPath, o.TLSKeyPath, func() *string { return &tls().ClientKeyPath })
	data(sKeyData, o.TLSKeyData, func() *[]byte { return &tls().ClientKeyData })
	str(sCAPath, o.TLSCAPath, func() *string { return &tls().ServerCACertPath })
	data(sCAData, o.TLSCAData, func() *[]byte { return &tls().ServerCACertData })
	str(sServerName, o.TLSServerName, func() *string { return &tls().ServerName })
	if o.TLSDisableHostVerification != nil {
		tls().DisableHostVerification = *o.TLSDisableHostVerification
		s.fromFlag[sNoVerify] = true
	}
}

// source names where a setting's value came from.
func (s *Settings) source(st setting) string {
	switch {
	case s.fromFlag[st]:
		return st.flag
	case s.fromEnv[st]:
		return st.env
	}
	return fmt.Sprintf("%s in profile %q of %s", st.toml, s.profileName, s.file)
}

// check refuses combinations envconfig would refuse, naming the settings.
func (s *Settings) check() error {
	if a := s.profile.Address; a != "" && !strings.Contains(a, "://") {
		// gRPC would dial a bare host on port 443, far from any worker's
		// frontend: a missing port is a mistake, said before dialing.
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return &LoadError{s.source(sAddress), fmt.Sprintf("address %q: want host:port, such as 127.0.0.1:7233", a)}
		}
	}
	t := s.profile.TLS
	if t == nil || t.Disabled {
		return nil
	}
	pairs := []struct {
		path     string
		data     []byte
		pathName setting
		dataName setting
	}{
		{t.ClientCertPath, t.ClientCertData, sCertPath, sCertData},
		{t.ClientKeyPath, t.ClientKeyData, sKeyPath, sKeyData},
		{t.ServerCACertPath, t.ServerCACertData, sCAPath, sCAData},
	}
	for _, p := range pairs {
		if p.path != "" && len(p.data) > 0 {
			return &LoadError{s.source(p.pathName), "cannot be used together with " + s.source(p.dataName) + ": set one"}
		}
	}
	hasCert := t.ClientCertPath != "" || len(t.ClientCertData) > 0
	hasKey := t.ClientKeyPath != "" || len(t.ClientKeyData) > 0
	switch {
	case hasCert && !hasKey:
		return &LoadError{s.certSource(), "a client certificate needs its key: set " + sKeyPath.env + " (or " + sKeyData.env + ")"}
	case hasKey && !hasCert:
		return &LoadError{s.keySource(), "a client key needs its certificate: set " + sCertPath.env + " (or " + sCertData.env + ")"}
	}
	return nil
}

func (s *Settings) certSource() string {
	if s.profile.TLS != nil && len(s.profile.TLS.ClientCertData) > 0 {
		return s.source(sCertData)
	}
	return s.source(sCertPath)
}

func (s *Settings) keySource() string {
	if s.profile.TLS != nil && len(s.profile.TLS.ClientKeyData) > 0 {
		return s.source(sKeyData)
	}
	return s.source(sKeyPath)
}

func (s *Settings) caSource() string {
	if s.profile.TLS != nil && len(s.profile.TLS.ServerCACertData) > 0 {
		return s.source(sCAData)
	}
	return s.source(sCAPath)
}

// Address is the frontend host:port ("" when nothing sets one).
func (s *Settings) Address() string { return s.profile.Address }

// Namespace is the Temporal namespace (default "default").
func (s *Settings) Namespace() string { return s.profile.Namespace }

// HasAPIKey reports whether an API key is set (its value is never exposed).
func (s *Settings) HasAPIKey() bool { return s.profile.APIKey != "" }

// TLSEnabled reports whether the connection uses TLS: a TLS section or
// variable that does not disable it, an API key (TLS implied, as in every
// Temporal SDK) or RequireTLS.
func (s *Settings) TLSEnabled() bool {
	t := s.profile.TLS
	if t != nil {
		return !t.Disabled
	}
	return s.profile.APIKey != "" || s.requireTLS
}

// TLSExplicitlyDisabled reports whether TEMPORAL_TLS=false (or the profile,
// or --tls=false) turned TLS off.
func (s *Settings) TLSExplicitlyDisabled() bool {
	return s.profile.TLS != nil && s.profile.TLS.Disabled
}

// HasClientCertificate reports whether a client certificate is configured.
func (s *Settings) HasClientCertificate() bool {
	t := s.profile.TLS
	return s.TLSEnabled() && t != nil && (t.ClientCertPath != "" || len(t.ClientCertData) > 0)
}

// With returns a copy for another address and namespace (an empty one keeps
// the current value); requireTLS turns TLS on even when nothing else does
// (the embedded server with a certificate).
func (s *Settings) With(address, namespace string, requireTLS bool) *Settings {
	c := *s
	if s.profile.TLS != nil {
		t := *s.profile.TLS
		c.profile.TLS = &t
	}
	if address != "" {
		c.profile.Address = address
	}
	if namespace != "" {
		c.profile.Namespace = namespace
	}
	c.requireTLS = c.requireTLS || requireTLS
	return &c
}

// Format prints the non-secret settings only, whatever the verb.
func (s Settings) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "temporalconn.Settings{Address:%s Namespace:%s APIKey:%t TLS:%t ClientCert:%t}",
		s.profile.Address, s.profile.Namespace, s.profile.APIKey != "", s.TLSEnabled(), s.HasClientCertificate())
}

// Default returns the settings with nothing configured: no address, the
// default namespace, no TLS (tests, hand-built configurations).
func Default() *Settings {
	return &Settings{profile: envconfig.ClientConfigProfile{Namespace: DefaultNamespace},
		fromFlag: map[setting]bool{}, fromEnv: map[setting]bool{}}
}

// lookupEnv adapts a lookup function to envconfig.EnvLookup. Environ (which
// envconfig scans for TEMPORAL_GRPC_META_* headers) lists the process's
// variables of that prefix that lookup also reports.
type lookupEnv func(string) (string, bool)

func (l lookupEnv) LookupEnv(k string) (string, bool) { return l(k) }

func (l lookupEnv) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "TEMPORAL_GRPC_META_") {
			continue
		}
		if v, ok := l(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
