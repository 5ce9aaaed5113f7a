package daemon

// ring is a bounded byte buffer with absolute offsets: it holds the last
// at most cap bytes written, [start, end) in stream offsets, growing its
// storage on demand up to cap. When headCap > 0 it also keeps the first
// headCap bytes ever written (the head: offsets [0, len(head))) for its
// whole life, so a read of those offsets is served after the ring has
// wrapped past them (an exec's result keeps head and tail). Not safe for
// concurrent use (the process lock guards it).
type ring struct {
	buf     []byte
	cap     int
	start   int64 // offset of the oldest byte held in buf
	end     int64 // offset after the newest byte (the total written)
	head    []byte
	headCap int
}

func newRing(capacity, headCap int) *ring {
	return &ring{cap: max(capacity, 1), headCap: max(headCap, 0)}
}

// write appends p, dropping the oldest bytes beyond cap (the head stays).
func (r *ring) write(p []byte) {
	if room := r.headCap - len(r.head); room > 0 && r.end == int64(len(r.head)) {
		r.head = append(r.head, p[:min(room, len(p))]...)
	}
	if len(p) >= r.cap {
		r.grow(r.cap)
		copy(r.buf, p[len(p)-r.cap:])
		r.end += int64(len(p))
		r.start = r.end - int64(r.cap)
		return
	}
	held := int(r.end - r.start)
	if need := held + len(p); need > len(r.buf) && len(r.buf) < r.cap {
		r.grow(min(r.cap, max(need, 2*len(r.buf), 4096)))
	}
	size := len(r.buf)
	for len(p) > 0 {
		pos := int(r.end % int64(size))
		n := copy(r.buf[pos:], p)
		p = p[n:]
		r.end += int64(n)
	}
	if int(r.end-r.start) > size {
		r.start = r.end - int64(size)
	}
}

// grow re-lays the held bytes into a buffer of size n (≥ the held count).
func (r *ring) grow(n int) {
	if n <= len(r.buf) {
		return
	}
	nb := make([]byte, n)
	held := r.read(r.start, int(r.end-r.start))
	r.buf = nb
	for i, b := range held {
		nb[int((r.start+int64(i))%int64(n))] = b
	}
}

// read returns a copy of at most max bytes of the ring from offset off
// (clamped into [start, end]); the head is not consulted.
func (r *ring) read(off int64, max int) []byte {
	off = min(int64(r.end), off)
	off = maxI64(off, r.start)
	n := int(min(int64(max), r.end-off))
	if n <= 0 {
		return nil
	}
	out := make([]byte, n)
	size := int64(len(r.buf))
	for i := 0; i < n; {
		pos := int((off + int64(i)) % size)
		i += copy(out[i:], r.buf[pos:min(len(r.buf), pos+n-i)])
	}
	return out
}

// readAt returns a copy of at most max bytes from offset off, the offset
// of its first byte and how many bytes before that are lost: bytes the
// ring dropped are served from the head when it holds them (then a read
// returns head bytes only), else skipped (dropped = at - off). off is
// clamped to end.
func (r *ring) readAt(off int64, max int) (data []byte, at, dropped int64) {
	off = min(off, r.end)
	if off < r.start && off < int64(len(r.head)) {
		n := min(int64(max), int64(len(r.head))-off)
		return append([]byte(nil), r.head[off:off+n]...), off, 0
	}
	at = maxI64(off, r.start)
	return r.read(at, max), at, at - off
}

func maxI64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
