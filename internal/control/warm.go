package control

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/bucketfs/bucketfs/cache"
)

// "warm" (Prefixes, Parallelism, Pin) fills the cache with every object
// under Prefixes: Replies with Warm set as it goes (at most every
// progressEvery), then one with Done and Warm set to the result, or one
// with Error (nothing was fetched: the objects do not fit, or the
// listing failed). The client closing its end stops the warm. "unpin"
// (Prefixes) gets one Reply with Done and Unpinned set.

// A warm's progress, its failures and its result are the cache's
// (cache/warm.go); their JSON is the protocol's.
type (
	WarmProgress = cache.WarmProgress
	WarmError    = cache.WarmError
	WarmReport   = cache.WarmReport
)

// Unpinned is what an unpin ended.
type Unpinned struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// WarmFunc warms the objects under prefixes, calling progress as it
// goes; an error means nothing was fetched.
type WarmFunc func(ctx context.Context, prefixes []string, parallelism int, pin bool, progress func(WarmProgress)) (WarmReport, error)

// progressEvery bounds how often a warm reports its progress.
const progressEvery = 200 * time.Millisecond

// handleWarm answers a "warm" request on c.
func (s *Server) handleWarm(c *net.UnixConn, req Request, reply func(Reply) bool) {
	if s.h.Warm == nil {
		reply(Reply{Error: "this mount cannot warm"})
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	// The client closing its end (Ctrl-C) ends the warm.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		var b [1]byte
		c.Read(b[:])
		cancel()
	}()
	defer func() {
		c.SetReadDeadline(time.Now()) // ends the reader above
		<-readDone
	}()
	s.log.Info("warm asked on the control socket", "prefixes", req.Prefixes, "pin", req.Pin, "parallelism", req.Parallelism)
	var last time.Time
	r, err := s.h.Warm(ctx, req.Prefixes, req.Parallelism, req.Pin, func(p WarmProgress) {
		if time.Since(last) < progressEvery {
			return
		}
		last = time.Now()
		// The failures come with the result.
		if !reply(Reply{Warm: &WarmReport{WarmProgress: p}}) {
			cancel()
		}
	})
	if err != nil && r.TotalFiles == 0 {
		reply(Reply{Error: err.Error()})
		return
	}
	reply(Reply{Done: true, Warm: &r})
}

// handleUnpin answers an "unpin" request.
func (s *Server) handleUnpin(req Request, reply func(Reply) bool) {
	if s.h.Unpin == nil {
		reply(Reply{Error: "this mount cannot unpin"})
		return
	}
	s.log.Info("unpin asked on the control socket", "prefixes", req.Prefixes)
	n, b := s.h.Unpin(req.Prefixes)
	reply(Reply{Done: true, Unpinned: &Unpinned{Files: n, Bytes: b}})
}

// Warm asks the mount at socket path to warm the objects under prefixes
// and calls progress as it goes. It returns the result; an error means
// nothing was fetched, or the exchange broke.
func Warm(ctx context.Context, path string, prefixes []string, parallelism int, pin bool, progress func(WarmProgress)) (WarmReport, error) {
	var res *WarmReport
	err := Call(ctx, path, Request{Cmd: "warm", Prefixes: prefixes, Parallelism: parallelism, Pin: pin}, func(r Reply) error {
		switch {
		case r.Done && r.Warm != nil:
			res = r.Warm
		case r.Warm != nil && progress != nil:
			progress(r.Warm.WarmProgress)
		}
		return nil
	})
	if err == nil && res == nil {
		err = errors.New("the mount ended the warm without an answer (unmounting?)")
	}
	if err != nil {
		return WarmReport{}, err
	}
	return *res, nil
}

// Unpin asks the mount at socket path to end the pins under prefixes.
func Unpin(ctx context.Context, path string, prefixes []string) (Unpinned, error) {
	var res *Unpinned
	err := Call(ctx, path, Request{Cmd: "unpin", Prefixes: prefixes}, func(r Reply) error {
		res = r.Unpinned
		return nil
	})
	if err == nil && res == nil {
		err = errors.New("the mount sent no answer (unmounting?)")
	}
	if err != nil {
		return Unpinned{}, err
	}
	return *res, nil
}
