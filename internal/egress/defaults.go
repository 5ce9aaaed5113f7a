package egress

// DefaultAllow is the worker's allow-list when SANDBOX_NETWORK_ALLOW is not
// set: the public package registries of the common ecosystems, HTTPS only,
// and the Debian and Ubuntu archives over HTTP and HTTPS (apt's default
// sources are plain HTTP; packages are signed). docs/SECURITY.md "Network
// modes" lists the same entries.
var DefaultAllow = []string{
	// Go: the module proxy and the checksum database.
	"proxy.golang.org:443", "sum.golang.org:443",
	// npm (and Yarn's mirror of it).
	"registry.npmjs.org:443", "registry.yarnpkg.com:443",
	// PyPI: the index and the files.
	"pypi.org:443", "files.pythonhosted.org:443",
	// crates.io: the API, the sparse index and the crate files.
	"crates.io:443", "index.crates.io:443", "static.crates.io:443",
	// Maven Central.
	"repo.maven.apache.org:443", "repo1.maven.org:443",
	// RubyGems.
	"rubygems.org:443", "index.rubygems.org:443",
	// Debian.
	"deb.debian.org:80", "deb.debian.org:443", "security.debian.org:80", "security.debian.org:443",
	// Ubuntu (and its country mirrors, e.g. us.archive.ubuntu.com).
	"archive.ubuntu.com:80", "archive.ubuntu.com:443", "*.archive.ubuntu.com:80", "*.archive.ubuntu.com:443",
	"security.ubuntu.com:80", "security.ubuntu.com:443", "ports.ubuntu.com:80", "ports.ubuntu.com:443",
}
