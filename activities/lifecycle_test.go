package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The destroy message says first what happened, then the notes.
func TestDestroyMessage(t *testing.T) {
	assert.Equal(t, "destroyed; nothing was unsaved", destroyMessage(false, nil))
	assert.Equal(t, "destroyed; work saved to r and p; 2 checkpoints kept", destroyMessage(false, []string{"work saved to r and p", "2 checkpoints kept"}))
	assert.Equal(t, "destroyed; unsaved work, checkpoints and backups discarded", destroyMessage(true, nil))
	assert.Equal(t, "destroyed; unsaved work, checkpoints and backups discarded; branch kept: x", destroyMessage(true, []string{"branch kept: x"}))
}
