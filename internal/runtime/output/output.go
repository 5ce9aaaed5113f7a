// Package output holds the bounded head+tail buffer every runtime adapter
// (local, bwrap, Docker, …) uses to cap a command's stdout and stderr
// (DESIGN.md "Payload discipline": command output is bounded head+tail, with a
// truncated flag and the total byte count).
package output

import (
	"strconv"
	"sync"
)

// MaxMarkerLen is the largest length, in bytes, of the marker Capped.Bytes
// inserts between head and tail, so len(Bytes()) <= Limit()+MaxMarkerLen always.
const MaxMarkerLen = 48

// Marker returns the line that replaces omitted bytes in capped output:
// "\n...[<omitted> bytes truncated]...\n".
func Marker(omitted int64) string {
	return "\n...[" + strconv.FormatInt(omitted, 10) + " bytes truncated]...\n"
}

// Capped is an io.Writer that keeps at most Limit() bytes of everything
// written to it: the first half (the head, Limit()/2 bytes) and the last half
// (the tail, the remaining Limit()-Limit()/2 bytes, kept in a ring buffer),
// while counting every byte. Its memory is bounded by Limit() whatever is
// written. It is safe for concurrent use. The zero value is not usable: call
// NewCapped.
type Capped struct {
	mu    sync.Mutex
	limit int
	head  []byte // at most headCap bytes, filled first
	tail  []byte // ring of exactly tailCap bytes once allocated
	// pos is the next write position in tail; tailLen the valid bytes in it.
	pos, tailLen int
	headCap      int
	tailCap      int
	total        int64
}

// NewCapped returns a writer that keeps at most limit bytes (head and tail
// halves); limit < 0 is treated as 0 (nothing kept, everything counted).
func NewCapped(limit int) *Capped {
	if limit < 0 {
		limit = 0
	}
	h := limit / 2
	return &Capped{limit: limit, headCap: h, tailCap: limit - h}
}

// Write records p and always returns len(p), nil: excess bytes are counted and
// dropped from the middle, never refused.
func (c *Capped) Write(p []byte) (int, error) {
	n := len(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		if c.head == nil {
			c.head = make([]byte, 0, c.headCap)
		}
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return n, nil
	}
	if c.tail == nil {
		c.tail = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		copy(c.tail, p[len(p)-c.tailCap:])
		c.pos, c.tailLen = 0, c.tailCap
		return n, nil
	}
	k := copy(c.tail[c.pos:], p)
	if k < len(p) {
		copy(c.tail, p[k:])
	}
	c.pos = (c.pos + len(p)) % c.tailCap
	c.tailLen = min(c.tailLen+len(p), c.tailCap)
	return n, nil
}

// Bytes returns a fresh copy of the kept output: everything written when
// Total() <= Limit(), otherwise head + Marker(Total()-Limit()) + tail.
// Its length is at most Limit()+MaxMarkerLen.
func (c *Capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var mark string
	if c.truncated() {
		mark = Marker(c.total - int64(len(c.head)) - int64(c.tailLen))
	}
	out := make([]byte, 0, len(c.head)+len(mark)+c.tailLen)
	out = append(out, c.head...)
	out = append(out, mark...)
	if c.tailLen < c.tailCap {
		// Never wrapped: the valid bytes are tail[:tailLen].
		return append(out, c.tail[:c.tailLen]...)
	}
	out = append(out, c.tail[c.pos:]...)
	return append(out, c.tail[:c.pos]...)
}

// Total returns the number of bytes written so far (kept or not).
func (c *Capped) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Truncated reports whether more than Limit() bytes were written, so that
// Bytes() omits some of them.
func (c *Capped) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated()
}

func (c *Capped) truncated() bool { return c.total > int64(c.limit) }

// Limit returns the cap in bytes given to NewCapped (0 for a negative one).
func (c *Capped) Limit() int { return c.limit }

// Join returns the kept output of a stream whose head and tail halves were
// captured elsewhere (a remote sandbox), in the form Capped.Bytes gives:
// head + tail when total <= len(head)+len(tail), otherwise head +
// Marker(omitted) + tail. total is the stream's full byte count.
func Join(head, tail []byte, total int64) []byte {
	out := make([]byte, 0, len(head)+len(tail)+MaxMarkerLen)
	out = append(out, head...)
	if omitted := total - int64(len(head)) - int64(len(tail)); omitted > 0 {
		out = append(out, Marker(omitted)...)
	}
	return append(out, tail...)
}
