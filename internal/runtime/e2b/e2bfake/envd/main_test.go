package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// POST /init adds its envVars to the sandbox's environment (envd's PostInit).
func TestInitSetsTheSandboxEnvironment(t *testing.T) {
	s := &server{}
	for _, body := range []string{`{"envVars":{"B":"2","A":"1"}}`, `{"envVars":{"A":"3"}}`, ``} {
		rec := httptest.NewRecorder()
		s.init(rec, httptest.NewRequest(http.MethodPost, "/init", strings.NewReader(body)))
		require.Equal(t, http.StatusNoContent, rec.Code)
	}
	require.Equal(t, []string{"A=3", "B=2"}, s.environment())
	rec := httptest.NewRecorder()
	s.init(rec, httptest.NewRequest(http.MethodPost, "/init", strings.NewReader(`{`)))
	require.Equal(t, http.StatusBadRequest, rec.Code)
}
