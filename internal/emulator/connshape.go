package emulator

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
)

// Shaping per TCP connection. A real network limits a connection, not a
// request: over HTTP/2 every request to a host shares one TCP connection,
// and so its bandwidth. The emulator's listeners therefore pace the bytes
// of each accepted connection (each direction on its own, to the current
// profile's PerConn) and of all of them together (Total), below TLS; the
// latency before each response stays per request (wanMiddleware), as a
// round trip is.

// shapedListener counts the connections it accepts and shapes them with
// the server's current profile.
type shapedListener struct {
	net.Listener
	s        *Server
	base     context.Context // ends when the server closes
	accepted *atomic.Int64
}

// Accept implements net.Listener.
func (l *shapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	ctx, cancel := context.WithCancel(l.base)
	return &shapedConn{Conn: c, s: l.s, ctx: ctx, cancel: cancel}, nil
}

// shapedConn paces one accepted connection. The profile is looked up at
// every Read and Write, so SetWAN applies to open connections too; the
// connection's own limiters are made again when it changes.
type shapedConn struct {
	net.Conn
	s      *Server
	ctx    context.Context // cancelled by Close: ends pacing waits
	cancel context.CancelFunc

	mu     sync.Mutex // a leaf: held for no I/O, no wait, no other lock
	cur    *shaper    // guarded by mu: the profile rd and wr were made for
	rd, wr *pacer     // guarded by mu; nil: not paced
}

// pacers returns the pacers of the current profile (nil: not paced).
func (c *shapedConn) pacers() (rd, wr *pacer) {
	sh := c.s.shaper.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if sh != c.cur {
		c.cur, c.rd, c.wr = sh, nil, nil
		if sh != nil {
			c.rd = newPacer(c.ctx, newLimiter(sh.profile.PerConn), sh.total)
			c.wr = newPacer(c.ctx, newLimiter(sh.profile.PerConn), sh.total)
		}
	}
	return c.rd, c.wr
}

// Read implements net.Conn: at most the pacer's chunk, then a wait for
// what was read.
func (c *shapedConn) Read(b []byte) (int, error) {
	p, _ := c.pacers()
	if p == nil {
		return c.Conn.Read(b)
	}
	if len(b) > p.chunk {
		b = b[:p.chunk]
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		if werr := p.wait(n); werr != nil {
			return n, net.ErrClosed
		}
	}
	return n, err
}

// Write implements net.Conn in slices of at most the pacer's chunk, each
// after its wait.
func (c *shapedConn) Write(b []byte) (int, error) {
	_, p := c.pacers()
	if p == nil {
		return c.Conn.Write(b)
	}
	written := 0
	for len(b) > 0 {
		n := min(len(b), p.chunk)
		if err := p.wait(n); err != nil {
			return written, net.ErrClosed
		}
		m, err := c.Conn.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// Close implements net.Conn; waits for pacing end at once.
func (c *shapedConn) Close() error {
	c.cancel()
	return c.Conn.Close()
}
