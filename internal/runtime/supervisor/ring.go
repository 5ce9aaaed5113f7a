package supervisor

// ring is a bounded byte buffer with absolute offsets: it holds the last
// at most cap bytes written, [start, end) in stream offsets, growing its
// storage on demand up to cap. Not safe for concurrent use (the process
// lock guards it).
type ring struct {
	buf   []byte
	cap   int
	start int64 // offset of the oldest byte held
	end   int64 // offset after the newest byte (the total written)
}

func newRing(capacity int) *ring { return &ring{cap: max(capacity, 1)} }

// write appends p, dropping the oldest bytes beyond cap.
func (r *ring) write(p []byte) {
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

// read returns a copy of at most max bytes from offset off (clamped into
// [start, end]).
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

func maxI64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
