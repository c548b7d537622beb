// Command bucketfs-emulator runs an in-memory Google Cloud Storage emulator
// in the foreground, for the bucketfs demo: point a mount at the printed URL
// and try things without a real bucket.
//
// Usage:
//
//	bucketfs-emulator [--addr 127.0.0.1:4443] [--bucket demo] [--seed] [--wan]
//	                  [--tls-addr 127.0.0.1:4444 --ca-out FILE]
//	                  [--vm-credentials [--token-lifetime 1h]]
//	                  [--pubsub-addr 127.0.0.1:8085 [--pubsub-topic projects/P/topics/T]
//	                   [--notify-delay D] [--notify-duplicate RATE] [--notify-reorder]]
//
// When ready it prints one line to stdout,
//
//	emulator listening on http://ADDR bucket=NAME
//
// and, with --tls-addr, a second one,
//
//	emulator listening on https://ADDR ca=FILE
//
// and, with --vm-credentials, one more,
//
//	metadata server listening on ADDR: set GCE_METADATA_HOST=ADDR
//
// and, with --pubsub-addr, one more,
//
//	pubsub emulator listening on ADDR topic=projects/P/topics/T
//
// (topic= empty without --pubsub-topic), and it runs until SIGINT or SIGTERM. Logs go to stderr.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/metadataserver"
)

// usage is printed by -h and on flag errors.
const usage = `bucketfs-emulator runs an in-memory Google Cloud Storage emulator in the
foreground, for trying bucketfs without a real bucket.

Usage:
  bucketfs-emulator [--addr 127.0.0.1:4443] [--bucket demo] [--seed] [--wan]
                    [--tls-addr 127.0.0.1:4444 --ca-out FILE]
                    [--vm-credentials [--token-lifetime 1h]]
                    [--pubsub-addr 127.0.0.1:8085 [--pubsub-topic projects/P/topics/T]
                     [--notify-delay D] [--notify-duplicate RATE] [--notify-reorder]]

When ready it prints "emulator listening on http://ADDR bucket=NAME" to stdout
(and, with --tls-addr, "emulator listening on https://ADDR ca=FILE") and serves
until interrupted (SIGINT or SIGTERM). All data is lost on exit.

Clients reach it with the JSON API endpoint http://ADDR/storage/v1/ and no
authentication; over TLS at https://TLS-ADDR/storage/v1/, trusting the
self-signed certificate written to --ca-out (bucketfs mount --ca-file FILE).
It offers h2 and http/1.1 there, as GCS does.

With --vm-credentials it checks credentials as GCS does (401 without a
valid bearer token) and runs a stand-in for a VM's metadata server that
hands out tokens: mount with GCE_METADATA_HOST=ADDR (printed) and without
--anonymous, as on a Compute Engine VM.

With --pubsub-addr it runs a Pub/Sub emulator there (set
PUBSUB_EMULATOR_HOST=ADDR) and publishes GCS's object change notifications
to it for the buckets with notification configurations (the JSON API's
notificationConfigs). --pubsub-topic creates that topic and a configuration
of the bucket for it (JSON_API_V1 payload, all events), and the emulator
prints "pubsub emulator listening on ADDR topic=projects/P/topics/T". The
--notify-* flags make notifications late, doubled or out of order, as
Pub/Sub may deliver them.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the exit, for readability and tests: it serves
// until ctx ends and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bucketfs-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:4443", "listen `address` (host:port); port 0 picks a free port")
	bucket := fs.String("bucket", "demo", "`name` of the bucket to create")
	seed := fs.Bool("seed", false, "fill the bucket with sample files (text, nested and implicit\ndirectories, empty files, 1 KiB/1 MiB/64 MiB binaries, one bad name)")
	wan := fs.Bool("wan", false, "shape traffic like a WAN link (30ms before each response, 25 MiB/s\nper TCP connection, 200 MiB/s in total)")
	tlsAddr := fs.String("tls-addr", "", "also serve HTTPS on this `address`, with a self-signed certificate\n(written to --ca-out) and h2 offered by ALPN")
	caOut := fs.String("ca-out", "", "`file` to write the TLS certificate to (needed with --tls-addr)")
	vm := fs.Bool("vm-credentials", false, "check bearer tokens, handed out by a metadata server stand-in\n(printed: set GCE_METADATA_HOST to its address), as on a VM")
	lifetime := fs.Duration("token-lifetime", time.Hour, "how long the tokens of --vm-credentials last")
	hns := fs.Bool("hierarchical", false, "give the bucket a hierarchical namespace: folders, and atomic\nfolder renames (as GCS documents them; see internal/emulator)")
	psAddr := fs.String("pubsub-addr", "", "run a Pub/Sub emulator on this `address` (port 0 picks one) and publish\nobject change notifications to it")
	psTopic := fs.String("pubsub-topic", "", "create this `topic` (projects/P/topics/T) and a notification\nconfiguration of the bucket for it (needs --pubsub-addr)")
	notifyDelay := fs.Duration("notify-delay", 0, "publish each notification this long after its change")
	notifyDup := fs.Float64("notify-duplicate", 0, "share (0 to 1) of notifications published twice")
	notifyReorder := fs.Bool("notify-reorder", false, "publish notifications in swapped pairs (a delete may come before\nthe create it follows)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bucketfs-emulator: unexpected arguments: %s\n\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return 2
	}

	if (*tlsAddr == "") != (*caOut == "") {
		fmt.Fprintln(stderr, "bucketfs-emulator: --tls-addr and --ca-out go together")
		return 2
	}

	var project, topic string
	if *psTopic != "" {
		var ok bool
		if project, topic, ok = splitTopic(*psTopic); !ok || *psAddr == "" {
			fmt.Fprintln(stderr, "bucketfs-emulator: --pubsub-topic needs --pubsub-addr and the form projects/P/topics/T")
			return 2
		}
	}
	if *notifyDup < 0 || *notifyDup > 1 {
		fmt.Fprintln(stderr, "bucketfs-emulator: --notify-duplicate is a share, 0 to 1")
		return 2
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := emulator.Options{Addr: *addr, Buckets: []string{*bucket}, TLS: *tlsAddr != "", TLSAddr: *tlsAddr, PubSubAddr: *psAddr}
	if *wan {
		p := emulator.DefaultWAN()
		opts.WAN = &p
		log.Info("WAN shaping on", "latency", p.Latency, "per_conn_bytes_per_s", p.PerConn, "total_bytes_per_s", p.Total)
	}
	var ms *metadataserver.Server
	if *vm {
		var err error
		if ms, err = metadataserver.Start(metadataserver.Options{Lifetime: *lifetime}); err != nil {
			log.Error("cannot start the metadata server", "err", err)
			return 1
		}
		defer ms.Close()
		opts.Tokens = ms
	}
	s, err := emulator.Start(opts)
	if err != nil {
		log.Error("cannot start the emulator", "err", err)
		return 1
	}
	defer s.Close()
	s.SetHierarchical(*bucket, *hns)
	s.SetNotifyFaults(emulator.NotifyFaults{Delay: *notifyDelay, Duplicate: *notifyDup, Reorder: *notifyReorder})
	if topic != "" {
		if err := s.CreateTopic(project, topic); err != nil {
			log.Error("cannot create the topic", "topic", *psTopic, "err", err)
			return 1
		}
		if _, err := s.AddNotification(*bucket, emulator.NotificationConfig{Topic: *psTopic, PayloadFormat: emulator.PayloadJSON}); err != nil {
			log.Error("cannot add the notification configuration", "topic", *psTopic, "err", err)
			return 1
		}
	}

	if *seed {
		if err := seedBucket(s, *bucket, log); err != nil {
			log.Error("cannot seed the bucket", "bucket", *bucket, "err", err)
			return 1
		}
	}

	if opts.TLS {
		if err := os.WriteFile(*caOut, s.CertPEM(), 0o644); err != nil {
			log.Error("cannot write the certificate", "err", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "emulator listening on %s bucket=%s\n", s.URL(), *bucket)
	if opts.TLS {
		fmt.Fprintf(stdout, "emulator listening on %s ca=%s\n", s.TLSURL(), *caOut)
	}
	if ms != nil {
		fmt.Fprintf(stdout, "metadata server listening on %s: set GCE_METADATA_HOST=%s\n", ms.Addr(), ms.Addr())
	}
	if a := s.PubSubAddr(); a != "" {
		fmt.Fprintf(stdout, "pubsub emulator listening on %s topic=%s\n", a, *psTopic)
	}
	<-ctx.Done()
	log.Info("shutting down", "requests", s.Requests(), "media_reads", s.TotalMediaReads(), "notifications", s.NotificationsPublished())
	return 0
}

// sampleObject is one object of the demo data set.
type sampleObject struct {
	name string
	data []byte
}

// sampleObjects returns the demo data set. It exercises what a mount has to
// handle: nested directories, a directory that exists only as a prefix
// (logs/), an explicit placeholder object (empty-dir/), an empty file,
// binaries of several sizes, and a name that is not a valid file path.
func sampleObjects() []sampleObject {
	text := func(s string) []byte { return []byte(strings.TrimLeft(s, "\n")) }
	return []sampleObject{
		{"README.txt", text(`
This bucket is served by bucketfs-emulator, an in-memory stand-in for Google
Cloud Storage. Everything here disappears when the emulator stops.

Things to look at once it is mounted:
  docs/guide/       nested directories
  logs/2026/11/     directories that exist only as a name prefix
  empty-dir/        a directory with a placeholder object and nothing else
  empty.txt         an empty file
  data/             pseudo-random binaries of 1 KiB, 1 MiB and 64 MiB
  bad//name         an object whose name is not a valid path (the mount warns)
`)},
		{"docs/guide/intro.md", text(`
# Introduction

bucketfs mounts a bucket as a directory. Reads are served from a local cache
once fetched; writes land locally and go back to the bucket in the background.
`)},
		{"docs/guide/advanced.md", text(`
# Advanced

Large files are fetched as parallel range reads; a read waits only for the
chunks it touches. Dirty files are uploaded after the last close, and
everything dirty is flushed on unmount.
`)},
		{"logs/2026/11/app.log", text(`
2026-11-01T09:00:00Z INFO  app started version=1.4.2
2026-11-01T09:00:01Z INFO  connected to database
2026-11-01T09:15:42Z WARN  slow request path=/report duration=2.4s
2026-11-01T10:03:17Z ERROR upstream timeout service=billing
2026-11-01T10:03:18Z INFO  retry succeeded service=billing
`)},
		{"empty-dir/", nil},
		{"empty.txt", nil},
		{"data/random-1KiB.bin", pseudoRandom("data/random-1KiB.bin", 1<<10)},
		{"data/random-1MiB.bin", pseudoRandom("data/random-1MiB.bin", 1<<20)},
		{"data/random-64MiB.bin", pseudoRandom("data/random-64MiB.bin", 64<<20)},
		{"bad//name", text("This object's name has an empty path segment, so it cannot be a file.\n")},
	}
}

// pseudoRandom returns n deterministic pseudo-random bytes, seeded by name,
// so that the demo's binaries are the same in every run.
func pseudoRandom(name string, n int) []byte {
	b := make([]byte, n)
	// ChaCha8's stream is fixed by its seed; its Read never fails.
	_, _ = rand.NewChaCha8(sha256.Sum256([]byte(name))).Read(b)
	return b
}

// seedBucket stores the demo data set in bucket.
func seedBucket(s *emulator.Server, bucket string, log *slog.Logger) error {
	objs := sampleObjects()
	var total int
	for _, o := range objs {
		gen, err := s.Put(bucket, o.name, o.data)
		if err != nil {
			return err
		}
		total += len(o.data)
		log.Debug("seeded", "object", o.name, "size", len(o.data), "generation", gen)
	}
	log.Info("seeded bucket", "bucket", bucket, "objects", len(objs), "bytes", total)
	return nil
}

// splitTopic reads "projects/P/topics/T".
func splitTopic(name string) (project, topic string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "topics" || parts[3] == "" {
		return "", "", false
	}
	return parts[1], parts[3], true
}
