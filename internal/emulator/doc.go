// Package emulator runs an in-process Google Cloud Storage emulator for
// tests, the demo and the benchmark.
//
// It wraps the in-memory backend of fake-gcs-server
// (github.com/fsouza/fake-gcs-server/fakestorage) and serves it from its own
// net/http server on a loopback listener, so that it can put middleware in
// front of the fake:
//   - counters: every request is counted, and media reads (GETs that
//     download object bytes) are counted per object, so a test can assert
//     how often bytes were fetched from the "network";
//   - faults: Fault makes every request naming a bucket fail with a given
//     HTTP status and a GCS-style JSON error body (for example 403 to
//     simulate refused credentials), and SetHook runs an arbitrary
//     per-request function before the fake;
//   - WAN shaping: a WANProfile adds latency before each response and paces
//     the bytes of each TCP connection the emulator accepts, each way, and
//     of all of them together (connshape.go), so the demo and the
//     benchmark see something closer to a real network than a loopback
//     socket: requests multiplexed on one HTTP/2 connection share its
//     bandwidth, as on a real link. Shape applies a per-request version of
//     it to any other http.Handler (the benchmark puts it in front of a
//     reverse proxy to an S3-compatible server, to time the XML multipart
//     upload path; its client speaks HTTP/1.1, a connection per request);
//   - TLS: with Options.TLS the same handler is served over HTTPS on a
//     second listener (TLSURL), with a self-signed certificate made at
//     start (CertPEM) and ALPN offering h2 and http/1.1, as GCS does
//     (tls.go). Connections are counted per listener (Connections,
//     TLSConnections), so a test can see how a client spreads requests;
//   - preconditions: the fake ignores ifGenerationMatch on compose and on
//     delete; the emulator checks it itself and answers 412 as GCS does
//     (serialised against other guarded calls, not against uploads);
//   - object names: a call that would make an object whose name is over
//     MaxObjectName (1024) bytes is answered 400, as GCS does; the fake
//     takes any length (namelimit.go);
//   - compose: a destination CRC32C (the client's Composer.SendCRC32C)
//     that is not the sources' is answered 400 before anything is written,
//     as GCS does; deleteSourceObjects deletes the sources; a compose over
//     an existing object gets the request's content type and encoding,
//     not the old object's (the fake ignores the first two and keeps the
//     old attributes; compose.go);
//   - resumable uploads: sessions are answered by the emulator, as GCS
//     documents them (status queries, resuming where the session holds
//     bytes to, bytes kept from a broken connection), and made into the
//     object through the fake at the end (resumable.go);
//   - hierarchical namespace: SetHierarchical makes a bucket say it has
//     one, and the emulator answers folders.rename and operations.get for
//     it (folder.go; written from GCS's documentation);
//   - credentials: with Options.Tokens (a TokenChecker, such as the
//     metadata server stand-in of internal/metadataserver) every request
//     needs "Authorization: Bearer T" with a T it takes as valid, or is
//     answered 401 with GCS's JSON error body, as GCS answers a missing,
//     expired or revoked token (auth.go); Unauthorized counts them. A
//     valid token without permission is GCS's 403: Fault plays that;
//   - many objects: PutMany seeds a bucket with up to millions of objects
//     kept in an ordered index of the emulator's own, which the fake
//     cannot hold (see "Many objects" below; seeded.go, seedhttp.go,
//     seedlist.go);
//   - notifications: with Options.PubSub the emulator runs a Pub/Sub fake
//     and publishes GCS's object change notifications to it, for the
//     buckets with notification configurations (see "Notifications"
//     below; pubsub.go, notifyconfig.go, notifywatch.go,
//     notifypublish.go).
//
// Middleware order, outermost first: counting, WAN shaping, the token
// check, hook and fault injection, the seeded store, the object-name
// limit, resumable sessions, notifications, folders, precondition
// checks, compose checks, metadata patches run alone, the fake. Counters therefore see every request, including
// shaped, hooked and faulted ones.
//
// # Using the official client
//
// The official client cloud.google.com/go/storage talks to the emulator with
// the options returned by Server.ClientOptions:
//
//	option.WithEndpoint(s.URL() + "/storage/v1/")
//	option.WithoutAuthentication()
//	storage.WithJSONReads()
//
// XML reads (the client's default without WithJSONReads) work too: the fake
// is configured with the listener's host:port as its public host, so the
// client's "/BUCKET/OBJECT" requests are routed to the download handler.
// Resumable upload session URLs are built from the request's Host header and
// therefore point back at this listener.
//
// # Many objects
//
// fake-gcs-server's memory backend keeps a bucket's live objects in a
// slice: an insert first scans it for the name (twice, building an
// "bucket/name#gen" string with fmt.Sprintf per element compared), a read
// scans it too, and a listing copies and sorts all of it for every page
// (and without maxResults answers everything in one page). So n inserts
// cost O(n²): 10,000 objects took 63 s, the next 10,000 207 s. Its
// backend is an internal package with no way to give the fake another
// one, so the emulator keeps a store of its own beside it, used only
// where a test asks for it:
//
//   - Server.PutMany(bucket, iter.Seq[Seed]) puts objects in a B-tree per
//     bucket (github.com/google/btree), ordered by name: O(log n) per
//     insert, lookup and listed entry. Generations, CRC32C, MD5 and times
//     are set as an upload to the fake sets them. Server.Object,
//     Generation, Put and Delete see these objects too.
//   - In a bucket PutMany has seeded, the emulator answers objects.list
//     itself, from both stores merged in name order (seedlist.go), and
//     objects.get and media reads (JSON, download and XML forms, HEAD,
//     Range) of seeded objects, with the fields and headers the fake
//     gives an uploaded object (TestSeededLooksUploaded compares them).
//   - Any other request that names a seeded object (an upload over it, a
//     delete, a patch, a copy or rewrite from or to it, a compose of it,
//     an ACL call, a folder call over it) first moves it to the fake with
//     the same generation, bytes and times, and the fake does the rest
//     as before. A name is in one store only. The fake thus holds what a
//     test wrote or changed; reads never move anything.
//   - Options.Seeded seeds the buckets from the start and makes Put store
//     into the index too, so that a suite written for the fake runs
//     against it (transfer's TestGCSSeededConformance; the integration
//     tests with BUCKETFS_EMU_SEEDED=1).
//
// What differs in a seeded bucket (buckets never seeded are served by the
// fake as before, byte for byte): listings page as GCS does, at most 1000
// entries (objects and prefixes together) per page, each entry on one
// page, with an opaque page token (the fake repeats every prefix on every
// page), and honour the items(...) part of "fields" (a partial response,
// as GCS gives; the client's Query.SetAttrSelection sends it). The XML
// listing (GET /BUCKET) lists only the fake's objects. A folder call
// moves every seeded object under the folder to the fake (for
// folders.list with no prefix: all of them), which is slow past some
// 10,000 objects. Batch requests (/batch/storage/v1) go to the fake
// and do not see seeded objects. PutMany of a name while a resumable
// upload of it is open leaves the name in both stores (the listing then
// shows the fake's). Server.Fake() sees only the fake's objects.
//
// Measured (2 shared cores, no -race, TestSeededScale with
// BUCKETFS_EMU_SCALE=1000000, ten directories of 100,000 objects of a
// few bytes), 2026-11-27:
//
//	seed 1,000,000 objects (PutMany)                 1.3-1.4 s
//	heap they take                                   141 MiB (148 B/object)
//	list one directory of 100,000, names only        0.5 s (100 pages)
//	the same with the fields transfer.GCS.List asks  1.4 s
//	list all 1,000,000 names, no delimiter           3.7-4.4 s (1000 pages)
//	1000 objects.get of random seeded objects        0.2 s
//
// At 10,000,000 (the same test, with other tests running beside it):
// seeded in 17 s, 1407 MiB of heap; a directory of 1,000,000 listed in
// 8.4 s (names) and 22 s (bucketfs's fields); the whole bucket in 103 s.
//
// TestSeededHundredThousand (100,000 objects, listed and read through
// the client) runs in some 6-12 s under -race on the same machine.
//
// # Notifications
//
// With Options.PubSub (or PubSubAddr) the emulator starts a Pub/Sub fake
// (cloud.google.com/go/pubsub/v2/pstest) on a gRPC listener of its own:
// PubSubAddr is what a client puts in PUBSUB_EMULATOR_HOST, CreateTopic
// makes a topic, PubSub returns the pstest server. Close stops it.
//
// The JSON API's notificationConfigs of a bucket (insert, list, get,
// delete) are answered by the emulator with GCS's fields (kind, id,
// topic written "//pubsub.googleapis.com/projects/P/topics/T", etag,
// selfLink, payload_format, event_types, object_name_prefix,
// custom_attributes); AddNotification and Notifications do the same
// from Go. An insert whose topic the Pub/Sub fake does not have is
// answered 400, as GCS answers it; a deleted bucket's configurations go
// with it.
//
// Every change of an object in a bucket with configurations publishes,
// to each matching configuration's topic, the message GCS publishes:
// attributes notificationConfig, eventType, payloadFormat, bucketId,
// objectId, objectGeneration, eventTime, the configuration's
// custom_attributes, and overwroteGeneration (on the FINALIZE of a new
// generation) or overwrittenByGeneration (on the DELETE, or ARCHIVE in a
// bucket that keeps versions, of the one it replaced); with JSON_API_V1
// the data is the object's resource as objects.get answers it. The
// changes are seen at two points, each comparing the objects a change
// may touch before and after it (notifywatch.go): a middleware for
// requests (uploads of every kind, resumable sessions included, copies
// and rewrites, compose and the sources it deletes, patches and updates
// (OBJECT_METADATA_UPDATE), ACL calls, deletes, XML uploads and deletes,
// folder renames: a FINALIZE at each new name, a DELETE at each old),
// and Put, Delete and PutMany. Messages are queued and published by one
// goroutine, in order; SetNotifyFaults delays, duplicates and reorders
// them. NotificationsPublished counts them.
//
// Not notified: batch requests (/batch/storage/v1); the delete of a
// version that is not live (a versioned bucket's ?generation=G of an
// old one); changes made through Fake(); two changes of one name that
// both complete before either is looked at again publish as one. The
// fake keeps metageneration at 1, and so does the payload.
//
// # Behaviour of the fake worth knowing
//
// Found by the tests in this package (fake-gcs-server v1.56.1,
// cloud.google.com/go/storage v1.70.0):
//
//   - Media reads honour both "generation=" and Range headers, through the
//     official client (ObjectHandle.Generation(g).NewRangeReader). A range
//     read answers 206 with the requested bytes.
//   - Reading a generation that is no longer current, in a bucket without
//     versioning, answers 404: the fake keeps no old generations, and the
//     client reports storage.ErrObjectNotExist. The same holds for a
//     generation that never existed. In a versioned bucket (created with
//     Fake().CreateBucketWithOpts) the old generation stays readable.
//   - A missing bucket: Bucket.Attrs and the Objects iterator both give an
//     error matching storage.ErrBucketNotExist (the fake answers 404 and
//     the client maps 404 to ErrBucketNotExist for bucket calls). Object
//     calls in a missing bucket (Attrs, NewReader) give
//     storage.ErrObjectNotExist, as they do against real GCS.
//   - The fake assigns generations from the wall clock in microseconds. Two
//     writes of one object in the same microsecond get the same generation,
//     and the second silently replaces the first "in place". Server.Put
//     avoids this by choosing a generation strictly greater than both the
//     current one and the previous Put's.
//   - The fake has no XML multipart API: "POST /BUCKET/OBJECT?uploads"
//     answers 400 with a JSON error ("invalid uploadType").
//   - The memory backend creates a missing bucket when an object is stored
//     into it directly; Server.Put refuses instead, like GCS would.
package emulator
