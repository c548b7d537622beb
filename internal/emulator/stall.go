package emulator

import (
	"net/http"
	"sync/atomic"
)

// bodyStall makes the answers to some requests stop mid-body.
type bodyStall struct {
	match func(r *http.Request) bool
	after int64         // body bytes sent before the stall
	count *atomic.Int64 // answers stalled so far
}

// StallBodies makes the answer to every later request for which match
// returns true (and that the fake answers) send after bytes of its body,
// flush them, and then send nothing more until the request's context
// ends (the client gives up, or the server closes): a stream that stalls
// mid-body. It returns a counter of the answers stalled. nil match
// removes it.
func (s *Server) StallBodies(match func(r *http.Request) bool, after int64) *atomic.Int64 {
	if match == nil {
		s.stall.Store(nil)
		return nil
	}
	st := &bodyStall{match: match, after: after, count: new(atomic.Int64)}
	s.stall.Store(st)
	return st.count
}

// stallWriter passes after bytes of a body on, then blocks.
type stallWriter struct {
	http.ResponseWriter
	r       *http.Request
	left    int64
	count   *atomic.Int64
	stalled bool
}

// stalling wraps w for r if a stall matches r.
func (s *Server) stalling(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	st := s.stall.Load()
	if st == nil || !st.match(r) {
		return w
	}
	return &stallWriter{ResponseWriter: w, r: r, left: st.after, count: st.count}
}

func (w *stallWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= w.left {
		w.left -= int64(len(p))
		return w.ResponseWriter.Write(p)
	}
	if w.stalled {
		return 0, w.r.Context().Err() // the stall ended with the request
	}
	n, err := w.ResponseWriter.Write(p[:w.left])
	w.left, w.stalled = 0, true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	w.count.Add(1)
	<-w.r.Context().Done()
	if err == nil {
		err = w.r.Context().Err()
	}
	return n, err
}
