package metrics

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Credentials returns p counting every failure to resolve a credential in
// sandbox_credential_failures_total{stage="resolve", error_type}. A
// provider that simply has no credential (nil, nil: public repositories) is
// no failure. nil stays nil.
func (m *Metrics) Credentials(p sandbox.CredentialProvider) sandbox.CredentialProvider {
	if p == nil {
		return nil
	}
	return countedCredentials{m: m, next: p}
}

type countedCredentials struct {
	m    *Metrics
	next sandbox.CredentialProvider
}

func (c countedCredentials) Credential(ctx context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	cred, err := c.next.Credential(ctx, scope)
	if err != nil {
		c.m.credFailures.WithLabelValues("resolve", ErrorType(err)).Inc()
	}
	return cred, err
}

// Access returns v counting every refused or failed access check (a
// user's credential that cannot read a repository, docs/SECURITY.md) in
// sandbox_credential_failures_total{stage="access", error_type}. nil stays nil.
func (m *Metrics) Access(v sandbox.AccessVerifier) sandbox.AccessVerifier {
	if v == nil {
		return nil
	}
	return countedAccess{m: m, next: v}
}

type countedAccess struct {
	m    *Metrics
	next sandbox.AccessVerifier
}

func (c countedAccess) VerifyAccess(ctx context.Context, scope sandbox.AuthScope, cred *sandbox.Credential) error {
	err := c.next.VerifyAccess(ctx, scope, cred)
	if err != nil {
		c.m.credFailures.WithLabelValues("access", ErrorType(err)).Inc()
	}
	return err
}
