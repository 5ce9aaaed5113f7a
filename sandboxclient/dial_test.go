package sandboxclient

import "testing"

// FromTemporal(nil) is nil (Cleanup.Result and others pass every outcome
// through it): it used to dereference the nil error for its payload hint.
func TestFromTemporalOfNilIsNil(t *testing.T) {
	if err := FromTemporal(nil); err != nil {
		t.Fatalf("FromTemporal(nil) = %v", err)
	}
}
