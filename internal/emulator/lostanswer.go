package emulator

import (
	"net/http"
)

// answerFunc is the type stored by SetAnswerHook.
type answerFunc func(r *http.Request, status int) int

// SetAnswerHook installs a function run after the fake has handled a
// request (it took effect), with the status the fake answered: if it
// returns a status other than 0, the client gets that status and a
// GCS-style JSON error body instead of the fake's answer. It makes a
// request whose answer was lost on its way while the request itself
// succeeded (a 503 from a front end, a proxy that cut the connection),
// which a client may then send again. While a hook is set, every answer
// is held until the fake is done (no streaming, no StallBodies). nil
// removes the hook.
func (s *Server) SetAnswerHook(h func(r *http.Request, status int) int) {
	if h == nil {
		s.answer.Store(nil)
		return
	}
	f := answerFunc(h)
	s.answer.Store(&f)
}

// loseAnswer serves r through next under the answer hook, if one is set,
// and reports whether it did.
func (s *Server) loseAnswer(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	h := s.answer.Load()
	if h == nil {
		return false
	}
	bw := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(bw, r)
	if f := s.after.Load(); f != nil {
		(*f)(r)
	}
	if status := (*h)(r, bw.status); status != 0 {
		writeError(w, status, "emulator: the request took effect, its answer was replaced by a test hook")
		return true
	}
	for k, v := range bw.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(bw.status)
	_, _ = w.Write(bw.body)
	return true
}
