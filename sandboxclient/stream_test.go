package sandboxclient

import (
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A chunk's bytes are handed on as they are, after a marker chunk naming
// the bytes that were dropped; the next offset is the chunk's, even when it
// carried nothing.
func TestEmitChunk(t *testing.T) {
	var got []sandboxapi.ExecChunk
	on := func(c sandboxapi.ExecChunk) { got = append(got, c) }
	if next := emitChunk(on, "stdout", sandboxapi.ProcessChunk{Data: []byte("abc"), NextOffset: 3}); next != 3 {
		t.Fatalf("next offset %d, want 3", next)
	}
	if next := emitChunk(on, "stderr", sandboxapi.ProcessChunk{Data: []byte("z"), NextOffset: 105, DroppedBytes: 100}); next != 105 {
		t.Fatalf("next offset %d, want 105", next)
	}
	if next := emitChunk(on, "stdout", sandboxapi.ProcessChunk{NextOffset: 7}); next != 7 {
		t.Fatalf("next offset %d, want 7", next)
	}
	want := []sandboxapi.ExecChunk{{Stream: "stdout", Data: []byte("abc")}, {Stream: "stderr", Data: []byte("\n...[100 bytes not streamed]...\n")}, {Stream: "stderr", Data: []byte("z")}}
	if len(got) != len(want) {
		t.Fatalf("chunks %q, want %q", got, want)
	}
	for i := range want {
		if got[i].Stream != want[i].Stream || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("chunk %d: %s %q, want %s %q", i, got[i].Stream, got[i].Data, want[i].Stream, want[i].Data)
		}
	}
}
