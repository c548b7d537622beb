package faultproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"
)

func get(t *testing.T, c *http.Client, url string) error {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

func TestModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	p := Start(t, srv.Listener.Addr().String())
	c := &http.Client{Timeout: 500 * time.Millisecond}
	if err := get(t, c, p.URL()); err != nil {
		t.Fatalf("pass: %v", err)
	}

	if err := p.SetMode(Refuse()); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refuse: dial gave %v, want ECONNREFUSED", err)
	}

	if err := p.SetMode(BlackHole()); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("black hole: dial: %v", err)
	}
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("black hole: read gave %v, want no answer", err)
	}
	conn.Close()

	if err := p.SetMode(Pass()); err != nil {
		t.Fatal(err)
	}
	if err := get(t, c, p.URL()); err != nil {
		t.Fatalf("pass again: %v", err)
	}
}
