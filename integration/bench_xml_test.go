package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/transfer"
)

// The xml-drain section of 'make bench' (BENCH_ONLY=xml-drain): the upload
// path that bucketfs takes against real GCS, at the network's limit.
//
// The drain row of bench_write_test.go goes through the emulator, which has
// no XML multipart API: bucketfs composes JSON-uploaded parts there, and
// the emulator's compose copies (and hashes) every byte, so that row
// measures the emulator more than bucketfs. This section times
// transfer.Parallel on its XML multipart path instead, against versitygw
// (an S3-compatible server; scripts/deps.sh installs it) on its posix
// backend in a t.TempDir(), behind a reverse proxy shaped with
// emulator.DefaultWAN(). One run is what a drain does after the file is in
// the cache: initiate a multipart upload of a staging object, send the
// parts in parallel from a local file, complete, check the staged size,
// copy the staging object into place (S3 CopyObject, standing in for GCS's
// one-source compose), then clean the staging prefix up.
//
// Not covered: the mount (no FUSE, no cache; Parallel reads a local file),
// GCS's authentication (SigV4 with a static key here) and x-goog-generation
// (versitygw has no generations), and preconditions (see s3Bucket).

const (
	xmlAccessKey  = "bucketfs-bench"
	xmlSecretKey  = "bucketfs-bench-secret"
	xmlBucketName = "bench-xml"
	benchXMLDrain = "bench-xml-drain.bin"
)

// benchXMLDrainSection is the xml-drain section: cfg.repeat timed uploads of
// one file of cfg.size, each checked (size and sha256) in versitygw.
func benchXMLDrainSection(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	gw := startVersitygw(t)
	if err := gw.createBucket(xmlBucketName); err != nil {
		t.Fatal(err)
	}

	// The proxy keeps the Host header the client signed (SetURL would put
	// versitygw's there): SigV4 covers it, and versitygw refuses the
	// signature of a request whose Host changed on the way (403).
	wan := emulator.DefaultWAN()
	target, err := url.Parse(gw.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		Transport: benchTransport(),
	}
	front := httptest.NewServer(emulator.Shape(proxy, wan))
	t.Cleanup(front.Close)

	client := gw.client()
	shaped := &s3Bucket{endpoint: front.URL, bucket: xmlBucketName, client: client}
	direct := &s3Bucket{endpoint: gw.url, bucket: xmlBucketName, client: client}
	mp, err := transfer.NewMultipart(transfer.MultipartOptions{Endpoint: front.URL, Bucket: xmlBucketName, Client: client, S3: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := shaped.CheckAccess(ctx); err != nil {
		t.Fatalf("versitygw through the proxy: %v", err)
	}

	src := filepath.Join(t.TempDir(), "xml-drain-source.bin")
	wantSum, _ := writeStream(t, src, cfg.size, 707)
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := scanSums(t, f, cfg.size) // before the runs, untimed: the cache scans a file before its upload
	var notes []string
	if _, _, same := statBoth(t, src, gw.dir); !same {
		notes = append(notes, "xml-drain: the source file and versitygw's data are on DIFFERENT filesystems")
	}

	var speeds []float64
	var runs []xmlRun
	for rep := range cfg.repeat {
		// Start every run with the disk quiet: the source file and the
		// previous run's objects are written out first.
		syscall.Sync()
		r := xmlDrainOnce(ctx, t, shaped, mp, f, cfg.size, sums, gw.cmd.Process.Pid)
		t.Logf("repeat %d xml-drain: %.1f MiB/s; %s", rep+1, r.mibps, r.String())

		// The object must be what was sent, read back without the proxy,
		// and nothing staged may be left; then the object goes, so that
		// every run writes a new one.
		a, err := direct.Stat(ctx, benchXMLDrain)
		if err != nil || a.Size != cfg.size {
			t.Fatalf("after run %d: Stat = %+v, %v; want %d bytes", rep+1, a, err, cfg.size)
		}
		h := sha256.New()
		n, err := direct.ReadRange(ctx, benchXMLDrain, a.Generation, 0, cfg.size, h)
		if got := fmt.Sprintf("%x", h.Sum(nil)); err != nil || n != cfg.size || got != wantSum {
			t.Fatalf("after run %d versitygw holds %d bytes, sha256 %s (%v); wrote %d bytes, sha256 %s", rep+1, n, got, err, cfg.size, wantSum)
		}
		if left := listAll(ctx, t, direct, transfer.StagingPrefix); len(left) != 0 {
			t.Fatalf("after run %d and Clean, the staging prefix still holds %q", rep+1, left)
		}
		if ups, err := mp.ListUploads(ctx, transfer.StagingPrefix); err != nil || len(ups) != 0 {
			t.Fatalf("after run %d and Clean, multipart uploads pending: %+v, %v", rep+1, ups, err)
		}
		if err := direct.Delete(ctx, benchXMLDrain, 0); err != nil {
			t.Fatalf("deleting %s after run %d: %v", benchXMLDrain, rep+1, err)
		}
		speeds = append(speeds, r.mibps)
		runs = append(runs, r)
	}

	v := median(speeds)
	capMiB := float64(wan.Total) / (1 << 20)
	// Each phase's wall and CPU times are medians of their own.
	med := func(f func(xmlRun) phase) phase {
		var walls, selfs, gws []float64
		for _, r := range runs {
			p := f(r)
			walls, selfs, gws = append(walls, float64(p.wall)), append(selfs, float64(p.cpu.self)), append(gws, float64(p.cpu.gw))
		}
		return phase{time.Duration(median(walls)), cpuTimes{time.Duration(median(selfs)), time.Duration(median(gws))}}
	}
	parts := (cfg.size + transfer.DefaultPartSize - 1) / transfer.DefaultPartSize
	sent := med(func(r xmlRun) phase { return r.parts })
	sentMiB := mibps(cfg.size, sent.wall)
	tbl.add(benchRow{
		name:     fmt.Sprintf("drain %s by XML multipart to versitygw, WAN (MiB/s)", sizeLabel(cfg.size)),
		native:   "cap " + fmtNum(capMiB),
		bucketfs: fmtNum(v),
		ratio:    fmtRatio(v / capMiB),
		target:   ">= 0.80 of cap",
		met:      metStr(v/capMiB >= 0.80),
		note: fmt.Sprintf("%d parts of %s, %d in flight; median phases (CPU in cores: test process + versitygw): initiate+parts at %s MiB/s (%.2f of cap) in %v; "+
			"complete %v; copy into place %v; clean %v; size and sha256 in versitygw ok",
			parts, sizeLabel(transfer.DefaultPartSize), transfer.DefaultPartParallelism,
			fmtNum(sentMiB), sentMiB/capMiB, sent,
			med(func(r xmlRun) phase { return r.complete }), med(func(r xmlRun) phase { return r.compose }), med(func(r xmlRun) phase { return r.clean })),
	})
	notes = append(notes,
		fmt.Sprintf("xml-drain row: what a drain costs on real GCS's path, timed from the start of transfer.Parallel.Put to the end of its Clean: "+
			"the parts sent in parallel over the WAN profile (a reverse proxy shaped like the cold rows), the multipart complete, a size check and a server-side copy "+
			"into place (S3 CopyObject for GCS's one-source compose), all on versitygw's posix backend on this disk; not through the mount (no FUSE, no cache); "+
			"GCS's auth and x-goog-generation are not covered, nor preconditions (the adapter ignores them); median of %d run(s)", len(runs)),
		fmt.Sprintf("xml-drain CPU: this machine has %d cores, shared by the client (which reads each part once: its CRC32C comes from the sums of the scan before the timed upload, as in the cache), the proxy and versitygw, "+
			"which hashes every byte it stores (MD5 for the ETag and a CRC64NVME checksum) on one core per request: the parts as they arrive, and the whole object "+
			"again on the copy into place (versitygw's CopyObject is a PutObject reading the source file); how long GCS takes for the complete and the one-source compose of such an object is not measured here",
			runtime.NumCPU()))
	return notes
}

// xmlRun is one timed upload and its phases.
type xmlRun struct {
	mibps float64
	total time.Duration // Put and Clean
	// parts runs from the start of Put to the return of the last part (so
	// it includes the initiate); stat is the size check, compose the copy
	// into place.
	parts, complete, stat, compose, clean phase
}

// phase is the wall-clock time of a step and the CPU time used meanwhile.
type phase struct {
	wall time.Duration
	cpu  cpuTimes
}

// cpuTimes is CPU time used by the test process (the proxy, the pacing,
// the client and its MD5s of the parts) and by versitygw.
type cpuTimes struct{ self, gw time.Duration }

func (c cpuTimes) sub(d cpuTimes) cpuTimes { return cpuTimes{c.self - d.self, c.gw - d.gw} }

// String gives the wall-clock time and the CPU used meanwhile, in cores
// busy on average: test process + versitygw.
func (p phase) String() string {
	return fmt.Sprintf("%v (CPU %.1f+%.1f cores)", p.wall.Round(time.Millisecond),
		p.cpu.self.Seconds()/p.wall.Seconds(), p.cpu.gw.Seconds()/p.wall.Seconds())
}

func (r xmlRun) String() string {
	return fmt.Sprintf("Put+Clean %v: initiate+parts %v, complete %v, stat %v, copy into place %v, clean %v (CPU in cores: test process + versitygw)",
		r.total.Round(time.Millisecond), r.parts, r.complete, r.stat, r.compose, r.clean)
}

// scanSums sums the size bytes of f in chunks of 8 MiB (the cache's
// default chunk), as the cache's scan does before an upload, and returns
// the options that carry them (the parts' checksums are then not read
// again).
func scanSums(t *testing.T, f *os.File, size int64) transfer.PutOptions {
	t.Helper()
	const chunk = 8 << 20
	o := transfer.PutOptions{Unconditional: true, ContentType: "application/octet-stream", SendCRC32C: true, Chunks: transfer.ChunkSums{Chunk: chunk}}
	buf := make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		n, err := f.ReadAt(buf[:min(chunk, size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		sum := crc32c.Checksum(buf[:n])
		o.Chunks.Sums = append(o.Chunks.Sums, sum)
		o.CRC32C = crc32c.Combine(o.CRC32C, sum, int64(n))
	}
	return o
}

// xmlDrainOnce uploads the size bytes of f as benchXMLDrain with a new
// Parallel over b and mp, cleans its staging prefix up, and returns the
// time and the phases. gwPid is versitygw's process, for its CPU time.
func xmlDrainOnce(ctx context.Context, t *testing.T, b *s3Bucket, mp *transfer.Multipart, f *os.File, size int64, sums transfer.PutOptions, gwPid int) xmlRun {
	t.Helper()
	clock := &phaseClock{gwPid: gwPid}
	p := transfer.NewParallel(&timedBucket{Bucket: b, clock: clock}, transfer.ParallelOptions{
		Multipart:   &timedMultipart{MultipartAPI: mp, clock: clock},
		PartSize:    transfer.DefaultPartSize,
		Parallelism: transfer.DefaultPartParallelism,
	})
	staging := transfer.NewStaging()
	cpu0 := clock.cpuNow()
	start := time.Now()
	a, err := p.Put(ctx, benchXMLDrain, f, size, sums, staging)
	if err != nil {
		p.Clean(ctx, staging)
		t.Fatalf("Parallel.Put of %s: %v", sizeLabel(size), err)
	}
	cleanCPU, cleanStart := clock.cpuNow(), time.Now()
	if err := p.Clean(ctx, staging); err != nil {
		t.Fatalf("Parallel.Clean: %v", err)
	}
	end := time.Now()
	if a.Size != size {
		t.Fatalf("Parallel.Put returned %+v, want %d bytes", a, size)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	return xmlRun{
		mibps:    mibps(size, end.Sub(start)),
		total:    end.Sub(start),
		parts:    phase{clock.lastPart.Sub(start), clock.lastPartCPU.sub(cpu0)},
		complete: clock.complete,
		stat:     clock.stat,
		compose:  clock.compose,
		clean:    phase{end.Sub(cleanStart), clock.cpuNow().sub(cleanCPU)},
	}
}

// phaseClock collects when the steps of one Parallel.Put ran and the CPU
// they used.
type phaseClock struct {
	gwPid int // versitygw's process

	mu          sync.Mutex
	lastPart    time.Time // when the last part to finish returned
	lastPartCPU cpuTimes  // and the CPU used by then
	// Each step summed over its calls (one each, unless Parallel
	// retried); they run one after the other.
	complete, stat, compose phase
}

func (c *phaseClock) cpuNow() cpuTimes { return cpuTimes{selfCPU(), procCPU(c.gwPid)} }

// time runs f and adds its wall-clock and CPU time to *p.
func (c *phaseClock) time(p *phase, f func()) {
	cpu0, start := c.cpuNow(), time.Now()
	f()
	wall, cpu := time.Since(start), c.cpuNow().sub(cpu0)
	c.mu.Lock()
	p.wall += wall
	p.cpu.self += cpu.self
	p.cpu.gw += cpu.gw
	c.mu.Unlock()
}

// timedMultipart times the parts and the complete of a MultipartAPI.
type timedMultipart struct {
	transfer.MultipartAPI
	clock *phaseClock
}

func (m *timedMultipart) UploadPart(ctx context.Context, name, uploadID string, n int, r io.ReaderAt, size int64, sum uint32) (string, error) {
	etag, err := m.MultipartAPI.UploadPart(ctx, name, uploadID, n, r, size, sum)
	now, cpu := time.Now(), m.clock.cpuNow()
	m.clock.mu.Lock()
	if now.After(m.clock.lastPart) {
		m.clock.lastPart, m.clock.lastPartCPU = now, cpu
	}
	m.clock.mu.Unlock()
	return etag, err
}

func (m *timedMultipart) Complete(ctx context.Context, name, uploadID string, parts []transfer.CompletedPart) (a transfer.ObjectAttrs, err error) {
	m.clock.time(&m.clock.complete, func() { a, err = m.MultipartAPI.Complete(ctx, name, uploadID, parts) })
	return a, err
}

// timedBucket times the size check and the copy into place of a Bucket.
type timedBucket struct {
	transfer.Bucket
	clock *phaseClock
}

func (b *timedBucket) Stat(ctx context.Context, name string) (a transfer.ObjectAttrs, err error) {
	b.clock.time(&b.clock.stat, func() { a, err = b.Bucket.Stat(ctx, name) })
	return a, err
}

func (b *timedBucket) Compose(ctx context.Context, dst string, srcs []string, o transfer.PutOptions) (a transfer.ObjectAttrs, err error) {
	b.clock.time(&b.clock.compose, func() { a, err = b.Bucket.Compose(ctx, dst, srcs, o) })
	return a, err
}

// listAll returns the names of every object under prefix.
func listAll(ctx context.Context, t *testing.T, b transfer.Bucket, prefix string) []string {
	t.Helper()
	var names []string
	q := transfer.ListQuery{Prefix: prefix}
	for {
		page, err := b.List(ctx, q)
		if err != nil {
			t.Fatalf("listing %q: %v", prefix, err)
		}
		for _, o := range page.Objects {
			names = append(names, o.Name)
		}
		if page.NextPageToken == "" {
			return names
		}
		q.PageToken = page.NextPageToken
	}
}

// benchTransport is an HTTP transport that keeps enough idle connections
// for every part in flight (http.DefaultTransport keeps two per host).
func benchTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4 * transfer.DefaultPartParallelism
	return tr
}

// versitygw is a running versitygw server whose data lives in dir.
type versitygw struct {
	url string
	dir string
	cmd *exec.Cmd
}

// startVersitygw starts versitygw on a free loopback port over a new
// directory under t.TempDir() (the disk of the bench's other files); it
// stops with the test. A missing binary fails the test: the section was
// asked for.
func startVersitygw(t *testing.T) *versitygw {
	t.Helper()
	bin, err := testutil.FindVersitygw()
	if err != nil {
		t.Fatalf("the xml-drain bench needs versitygw: %v: run scripts/deps.sh", err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	// The port is free when we look but may be taken before versitygw
	// binds it: try a few.
	for attempt := 0; ; attempt++ {
		gw, err := startVersitygwOn(t, bin, dir, logPath)
		if err == nil {
			return gw
		}
		if attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

func startVersitygwOn(t *testing.T, bin, dir, logPath string) (*versitygw, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()

	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "--quiet", "--port", addr, "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+xmlAccessKey, "ROOT_SECRET_KEY="+xmlSecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	stop := func() {
		cmd.Process.Kill()
		<-done
	}
	output := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}

	// Ready when it answers HTTP at all (an unsigned request gets an
	// error status, which is fine).
	gw := &versitygw{url: "http://" + addr, dir: dir, cmd: cmd}
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := probe.Get(gw.url + "/")
		if err == nil {
			resp.Body.Close()
			t.Cleanup(stop)
			return gw, nil
		}
		select {
		case <-done:
			return nil, fmt.Errorf("versitygw exited at start: %s", output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("versitygw did not answer on %s within 30s: %v; output: %s", addr, err, output())
		}
	}
}

// client returns an HTTP client that signs with the server's root key.
func (gw *versitygw) client() *http.Client {
	return &http.Client{Transport: &transfer.SigV4Transport{AccessKey: xmlAccessKey, SecretKey: xmlSecretKey, Base: benchTransport()}}
}

// createBucket creates bucket with a signed PUT.
func (gw *versitygw) createBucket(bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, gw.url+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := gw.client().Do(req)
	if err != nil {
		return fmt.Errorf("creating bucket %s: %w", bucket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("creating bucket %s: %w", bucket, s3Error(resp))
	}
	return nil
}

// s3Bucket is a transfer.Bucket over the S3 API of versitygw, with what
// the XML path of transfer.Parallel needs done properly: Stat (HEAD),
// List (ListObjectsV2), Delete, and Compose of exactly one source
// (CopyObject, which copies inside the server as GCS's compose does).
// Put and ReadRange are plain PUT and ranged GET.
//
// Preconditions are NOT honoured: versitygw's S3 API has none on
// CopyObject, and no generations (every object has generation 1), so
// PutOptions.IfGenerationMatch and Delete's generation are ignored. The
// bench measures speed with it, not safety. Nor does it retry: it talks to
// a server on this machine.
type s3Bucket struct {
	endpoint string // base URL, without a trailing '/'
	bucket   string
	client   *http.Client // signs (SigV4)
}

var _ transfer.Bucket = (*s3Bucket)(nil)

// maxS3ErrorBody is how much of an error body is read.
const maxS3ErrorBody = 64 << 10

func (b *s3Bucket) Name() string { return b.bucket }

// url returns the URL of object name (the bucket for "") with query q
// (already encoded).
func (b *s3Bucket) url(name, q string) string {
	u := b.endpoint + "/" + b.bucket
	if name != "" {
		u += "/" + s3Escape(name, true)
	}
	if q != "" {
		u += "?" + q
	}
	return u
}

// send sends a request with an optional body and headers, and returns the
// response whatever its status; the caller closes its body.
func (b *s3Bucket) send(ctx context.Context, op, method, name, q string, body []byte, hdr http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url(name, q), rd)
	if err != nil {
		return nil, b.opErr(op, name, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, b.opErr(op, name, err)
	}
	return resp, nil
}

// do is send with a status outside 2xx turned into an *transfer.OpError
// of op; on success the caller closes the body.
func (b *s3Bucket) do(ctx context.Context, op, method, name, q string, body []byte, hdr http.Header) (*http.Response, error) {
	resp, err := b.send(ctx, op, method, name, q, body, hdr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, b.opErr(op, name, s3Error(resp))
	}
	return resp, nil
}

func (b *s3Bucket) opErr(op, name string, err error) error {
	return &transfer.OpError{Op: op, Bucket: b.bucket, Object: name, Err: err}
}

// s3Error describes a failed response, wrapping the sentinel of transfer
// that its status or S3 error code stands for.
func s3Error(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxS3ErrorBody))
	var e struct{ Code, Message string }
	_ = xml.Unmarshal(body, &e) // HEAD answers have no body
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code + ": " + e.Message
	}
	var sentinel error
	switch {
	case e.Code == "NoSuchBucket":
		sentinel = transfer.ErrBucketNotExist
	case resp.StatusCode == http.StatusNotFound:
		sentinel = transfer.ErrNotExist
	case resp.StatusCode == http.StatusUnauthorized:
		sentinel = transfer.ErrUnauthenticated
	case resp.StatusCode == http.StatusForbidden:
		sentinel = transfer.ErrPermission
	case resp.StatusCode == http.StatusPreconditionFailed:
		sentinel = transfer.ErrPrecondition
	}
	if sentinel == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}

// attrsOf reads the attributes of name from the headers of a HEAD or GET.
func attrsOf(name string, resp *http.Response) transfer.ObjectAttrs {
	a := transfer.ObjectAttrs{Name: name, Size: resp.ContentLength, Generation: 1, Metageneration: 1, ContentType: resp.Header.Get("Content-Type")}
	a.Updated, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	return a
}

// Stat is a HEAD of the object.
func (b *s3Bucket) Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error) {
	resp, err := b.do(ctx, "stat", http.MethodHead, name, "", nil, nil)
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	resp.Body.Close()
	return attrsOf(name, resp), nil
}

// List is one page of ListObjectsV2.
func (b *s3Bucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	params := []string{"list-type=2", "prefix=" + s3Escape(q.Prefix, false)}
	if q.Delimiter != "" {
		params = append(params, "delimiter="+s3Escape(q.Delimiter, false))
	}
	if q.PageToken != "" {
		params = append(params, "continuation-token="+s3Escape(q.PageToken, false))
	}
	if q.PageSize > 0 {
		params = append(params, "max-keys="+strconv.Itoa(q.PageSize))
	}
	resp, err := b.do(ctx, "list", http.MethodGet, "", strings.Join(params, "&"), nil, nil)
	if err != nil {
		return transfer.ListPage{}, err
	}
	defer resp.Body.Close()
	var res struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		IsTruncated           bool
		NextContinuationToken string
		Contents              []struct {
			Key          string
			Size         int64
			LastModified string
		}
		CommonPrefixes []struct{ Prefix string }
	}
	if err := xml.NewDecoder(resp.Body).Decode(&res); err != nil {
		return transfer.ListPage{}, b.opErr("list", "", fmt.Errorf("decoding ListObjectsV2: %w", err))
	}
	var page transfer.ListPage
	for _, c := range res.Contents {
		updated, _ := time.Parse(time.RFC3339, c.LastModified)
		page.Objects = append(page.Objects, transfer.ObjectAttrs{Name: c.Key, Size: c.Size, Generation: 1, Metageneration: 1, Updated: updated})
	}
	for _, p := range res.CommonPrefixes {
		page.Prefixes = append(page.Prefixes, p.Prefix)
	}
	if res.IsTruncated {
		if res.NextContinuationToken == "" {
			return transfer.ListPage{}, b.opErr("list", "", errors.New("truncated listing without a continuation token"))
		}
		page.NextPageToken = res.NextContinuationToken
	}
	return page, nil
}

// ReadRange is a ranged GET; gen is ignored (no generations here).
func (b *s3Bucket) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	if length <= 0 {
		return 0, nil
	}
	hdr := http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+length-1)}}
	resp, err := b.send(ctx, "read", http.MethodGet, name, "", nil, hdr)
	if err != nil {
		return 0, err
	}
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		return 0, nil // off is at or past the end
	case resp.StatusCode/100 != 2:
		defer resp.Body.Close()
		return 0, b.opErr("read", name, s3Error(resp))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent && off > 0 {
		return 0, b.opErr("read", name, fmt.Errorf("asked for bytes from %d, got HTTP %d", off, resp.StatusCode))
	}
	n, err := io.CopyN(w, resp.Body, length)
	if err == io.EOF {
		err = nil // the object ended first
	}
	if err != nil {
		return n, b.opErr("read", name, err)
	}
	return n, nil
}

// Put is a single PUT. It reads r into memory first, since S3 wants a
// Content-Length: it is for small objects (the XML path never calls it).
// The conditions of o are ignored (see s3Bucket).
func (b *s3Bucket) Put(ctx context.Context, name string, r io.Reader, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return transfer.ObjectAttrs{}, b.opErr("put", name, err)
	}
	hdr := http.Header{}
	if o.ContentType != "" {
		hdr.Set("Content-Type", o.ContentType)
	}
	for k, v := range o.Metadata {
		hdr.Set("X-Amz-Meta-"+k, v)
	}
	resp, err := b.do(ctx, "put", http.MethodPut, name, "", data, hdr)
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	resp.Body.Close()
	return transfer.ObjectAttrs{Name: name, Size: int64(len(data)), Generation: 1, Metageneration: 1,
		Updated: time.Now(), ContentType: o.ContentType, Metadata: o.Metadata}, nil
}

// Compose of one source is a CopyObject, then a HEAD of the copy for its
// attributes (GCS's compose answers with them; CopyObject does not say
// the size). More sources are an error: S3 has no compose.
func (b *s3Bucket) Compose(ctx context.Context, dst string, srcs []string, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	if len(srcs) != 1 {
		return transfer.ObjectAttrs{}, b.opErr("compose", dst, fmt.Errorf("the S3 adapter composes exactly one source (a copy), not %d", len(srcs)))
	}
	hdr := http.Header{"X-Amz-Copy-Source": {"/" + b.bucket + "/" + s3Escape(srcs[0], true)}}
	resp, err := b.do(ctx, "compose", http.MethodPut, dst, "", nil, hdr)
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	// A copy may fail after its 200 has gone out: S3 then sends an
	// <Error> body instead of <CopyObjectResult>.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxS3ErrorBody))
	resp.Body.Close()
	if err != nil {
		return transfer.ObjectAttrs{}, b.opErr("compose", dst, err)
	}
	var res struct {
		XMLName xml.Name
		Code    string
		Message string
	}
	if err := xml.Unmarshal(body, &res); err != nil || res.XMLName.Local != "CopyObjectResult" {
		return transfer.ObjectAttrs{}, b.opErr("compose", dst, fmt.Errorf("CopyObject answered %q (%s: %s)", res.XMLName.Local, res.Code, res.Message))
	}
	a, err := b.Stat(ctx, dst)
	if err != nil {
		return transfer.ObjectAttrs{}, b.opErr("compose", dst, err)
	}
	return a, nil
}

// Delete is a DELETE of the object; gen is ignored (see s3Bucket). S3
// answers 204 for a missing key as well, so ErrNotExist comes only from a
// server that says 404.
// Copy is not needed by the bench.
func (b *s3Bucket) Copy(ctx context.Context, src string, srcGen int64, dst string, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	return transfer.ObjectAttrs{}, b.opErr("copy", dst, errors.New("not supported by this test bucket"))
}

// SetMetadata is not needed by the bench (S3 changes metadata only by a
// copy onto itself).
func (b *s3Bucket) SetMetadata(ctx context.Context, name string, gen int64, md map[string]string) (transfer.ObjectAttrs, error) {
	return transfer.ObjectAttrs{}, b.opErr("setmetadata", name, errors.New("not supported by this test bucket"))
}

func (b *s3Bucket) RenameFolder(ctx context.Context, from, to string) error {
	return b.opErr("rename folder", from, transfer.ErrNotSupported)
}

func (b *s3Bucket) DeleteEmptyFolders(ctx context.Context, prefix string) error {
	return b.opErr("delete folders", prefix, transfer.ErrNotSupported)
}

func (b *s3Bucket) Delete(ctx context.Context, name string, gen int64) error {
	resp, err := b.do(ctx, "delete", http.MethodDelete, name, "", nil, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// CheckAccess is a HEAD of the bucket.
func (b *s3Bucket) CheckAccess(ctx context.Context) error {
	resp, err := b.send(ctx, "check", http.MethodHead, "", "", nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		// A HEAD has no body to say NoSuchBucket: here 404 is the bucket.
		return b.opErr("check", "", fmt.Errorf("%w: HTTP 404", transfer.ErrBucketNotExist))
	case resp.StatusCode/100 != 2:
		return b.opErr("check", "", s3Error(resp))
	}
	return nil
}

// s3Escape percent-encodes s as Signature Version 4 canonicalises it:
// every byte but the unreserved characters of RFC 3986 (and '/' if
// keepSlash), with upper-case hex digits. Since the signer re-encodes what
// it finds on the wire the same way, signed path and query stay equal to
// what the server reconstructs.
func s3Escape(s string, keepSlash bool) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' && keepSlash {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, "%%%02X", c)
	}
	return sb.String()
}
