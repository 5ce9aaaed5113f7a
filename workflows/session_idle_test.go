package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An idle turn waits for the runtime's hibernation while it runs, else for
// the session's close; never less than a second; unbounded while an
// operation is in flight (its end wakes the run).
func TestIdleWait(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stopAt, closeAt := now.Add(20*time.Minute), now.Add(6*time.Hour)
	assert.Equal(t, 20*time.Minute, idleWait(0, true, now, stopAt, closeAt))
	assert.Equal(t, 6*time.Hour, idleWait(0, false, now, stopAt, closeAt))
	assert.Equal(t, time.Second, idleWait(0, true, now, now.Add(-time.Minute), closeAt), "a passed deadline still waits a second")
	assert.Equal(t, time.Duration(0), idleWait(1, true, now, stopAt, closeAt))
}
