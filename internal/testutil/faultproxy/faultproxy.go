// Package faultproxy is a TCP proxy for tests that puts network faults
// between a client and a server: it passes bytes through, refuses
// connections, or black-holes them (accepts, never answers).
//
// A mode decides what happens to each connection (Mode). To add one (for
// example "stall the body after N bytes"), write a type with the Mode
// methods: serve gets the client's connection and a function that dials
// the target, and owns the connection until it returns or ctx ends.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does with connections.
type Mode interface {
	// listens reports whether the proxy accepts connections in this mode
	// (false: its listener is closed, so connecting is refused).
	listens() bool
	// serve handles one accepted client connection until ctx ends (the
	// mode changed, or the proxy closed) or the connection is done. It
	// need not close client: the proxy does.
	serve(ctx context.Context, client net.Conn, dial func() (net.Conn, error))
}

type passMode struct{}

// Pass forwards bytes both ways.
func Pass() Mode { return passMode{} }

func (passMode) listens() bool { return true }

func (passMode) serve(ctx context.Context, client net.Conn, dial func() (net.Conn, error)) {
	up, err := dial()
	if err != nil {
		return
	}
	defer up.Close()
	pipe(ctx, client, up, nil)
}

type refuseMode struct{}

// Refuse closes the listener: new connections get ECONNREFUSED, and
// connections open when the mode is set are closed.
func Refuse() Mode { return refuseMode{} }

func (refuseMode) listens() bool                                             { return false }
func (refuseMode) serve(context.Context, net.Conn, func() (net.Conn, error)) {}

type blackHoleMode struct{}

// BlackHole accepts connections and never answers nor reads them: a
// request is sent into the void (its writes stall once the socket's
// buffers are full). Connections open when the mode is set go silent
// the same way.
func BlackHole() Mode { return blackHoleMode{} }

func (blackHoleMode) listens() bool { return true }

func (blackHoleMode) serve(ctx context.Context, _ net.Conn, _ func() (net.Conn, error)) {
	<-ctx.Done()
}

// pipe copies both ways until one side ends or ctx ends. A mode that
// alters the bytes from the server to the client passes down (nil: copy
// as they are).
func pipe(ctx context.Context, client, up net.Conn, down func(dst io.Writer, src io.Reader)) {
	if down == nil {
		down = func(dst io.Writer, src io.Reader) { io.Copy(dst, src) }
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, client); done <- struct{}{} }()
	go func() { down(client, up); done <- struct{}{} }()
	ended := 0
	select {
	case <-done:
		ended = 1
		client.Close()
	case <-ctx.Done():
		// The mode changed: the client's connection is left open (the
		// proxy closes it, or a black hole keeps it silent); the copies
		// on it are unblocked, not ended.
		client.SetDeadline(time.Now())
	}
	up.Close()
	for ; ended < 2; ended++ {
		<-done
	}
	client.SetDeadline(time.Time{})
}

// Proxy listens on a loopback port and forwards to a target address under
// its current mode.
type Proxy struct {
	target string
	addr   string // the port it listens on, kept across Refuse

	mu     sync.Mutex
	mode   Mode
	ln     net.Listener          // nil while refusing
	cut    context.CancelFunc    // ends the connections of the current mode
	ctx    context.Context       // of the current mode
	conns  map[net.Conn]struct{} // open client connections
	closed bool
	wg     sync.WaitGroup
}

// Start runs a proxy to target (host:port) in Pass mode; it closes with
// the test.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("starting fault proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// New runs a proxy to target in Pass mode.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, mode: Pass()}
	p.ctx, p.cut = context.WithCancel(context.Background())
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL is "http://" + Addr().
func (p *Proxy) URL() string { return "http://" + p.addr }

// SetMode switches the proxy to m. The connections open under the old
// mode end (closed; under BlackHole they stay open and silent).
func (p *Proxy) SetMode(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	_, silent := m.(blackHoleMode)
	p.cut()
	if !silent {
		for c := range p.conns {
			c.Close()
		}
	}
	p.ctx, p.cut = context.WithCancel(context.Background())
	p.mode = m
	switch {
	case !m.listens() && p.ln != nil:
		p.ln.Close()
		p.ln = nil
	case m.listens() && p.ln == nil:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("faultproxy: listening again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	return nil
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cut()
		if p.ln != nil {
			p.ln.Close()
			p.ln = nil
		}
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed: Refuse or Close
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		go p.handle(c)
		p.mu.Unlock()
	}
}

// handle serves c under the modes that follow each other until c is done:
// a connection black-holed stays open (and silent) until the next mode,
// which closes it.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	dial := func() (net.Conn, error) { return net.Dial("tcp", p.target) }
	p.mu.Lock()
	m, ctx := p.mode, p.ctx
	p.mu.Unlock()
	m.serve(ctx, c, dial)
	if _, ok := m.(passMode); !ok {
		return
	}
	// Pass ended: by its own end, or because the mode changed. Under a
	// black hole the connection stays open and silent.
	p.mu.Lock()
	next, nctx := p.mode, p.ctx
	p.mu.Unlock()
	if _, silent := next.(blackHoleMode); silent && ctx.Err() != nil {
		next.serve(nctx, c, dial)
	}
}
