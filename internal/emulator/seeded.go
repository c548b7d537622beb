package emulator

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"
	"strings"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/btree"
)

// The seeded store: objects put by PutMany live in an ordered index of the
// emulator's own (a B-tree per bucket), not in the fake, whose memory
// backend keeps a bucket's objects in a slice and finds one by a linear
// scan (so that n inserts cost O(n²), and each lookup O(n)). The index
// inserts, finds and lists in O(log n) (a page of a listing in O(p log n)).
//
// A name lives in at most one of the two stores. Reads of a seeded object
// (objects.get, media reads, listings) are answered from the index
// (seedhttp.go, seedlist.go). Any other request that names a seeded object
// (an overwrite, a delete, a patch, a copy, a compose, a folder call)
// first moves it into the fake with the same generation, content and
// times ("promotion"), and the fake then does what it always did. So the
// fake holds only the objects a test writes or touches, and keeps all its
// behaviour for them.
//
// Lock order (in this package): putMu before seedMu before patchMu. seedMu
// is never held across network I/O: answers are encoded into memory under
// it and written after it is released. Promotion and the direct helpers
// (Put, Delete) write the fake while holding seedMu, so that a listing
// (which reads both stores under seedMu.RLock) sees every name exactly
// once.

// seedDegree is the B-tree's degree: wide nodes keep the tree shallow and
// its memory per object small.
const seedDegree = 64

// Seed is one object for PutMany.
type Seed struct {
	Name        string
	Data        []byte // kept by the emulator; the caller must not change it afterwards
	ContentType string // "" leaves it unset, as an upload without one
}

// seedObject is a seeded object. It is never changed once in the index:
// a new version replaces it.
type seedObject struct {
	name        string
	data        []byte
	contentType string
	gen         int64
	created     int64 // microseconds since the epoch (the fake keeps times to the microsecond)
	crc32c      uint32
	md5         [md5.Size]byte
}

// seedTree is a bucket's seeded objects, ordered by name.
type seedTree = btree.BTreeG[*seedObject]

// castagnoli is the CRC32C table (GCS's checksum).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func seedLess(a, b *seedObject) bool { return a.name < b.name }

// seedKey is a probe for lookups in the index.
func seedKey(name string) *seedObject { return &seedObject{name: name} }

// seededBucket reports whether PutMany ever seeded bucket: its listings
// and reads then go through the index.
func (s *Server) seededBucket(bucket string) bool {
	s.seedMu.RLock()
	defer s.seedMu.RUnlock()
	return s.seeded[bucket] != nil
}

// lookupSeed returns the seeded object bucket/name, or nil.
func (s *Server) lookupSeed(bucket, name string) *seedObject {
	s.seedMu.RLock()
	defer s.seedMu.RUnlock()
	return s.lookupSeedLocked(bucket, name)
}

func (s *Server) lookupSeedLocked(bucket, name string) *seedObject {
	t := s.seeded[bucket]
	if t == nil {
		return nil
	}
	o, _ := t.Get(seedKey(name))
	return o
}

// seedBatch is how many objects PutMany inserts per hold of seedMu, so
// that requests served meanwhile wait at most for one batch.
const seedBatch = 4096

// PutMany stores every object of objs in bucket through the seeded store:
// no HTTP, no counters, no shaping, O(log n) per object (a million small
// objects in a few seconds). Each gets a new generation, greater than any
// chosen before; a name that already exists gets a new version. To
// clients the objects are like any other: they list, stat, read,
// overwrite, delete, copy and compose them through the JSON API (see
// the package documentation for what differs in a seeded bucket). The
// bucket must exist. It returns how many objects were stored; on an
// error (a name over MaxObjectName or empty) the objects before it stay.
// In a bucket with notification configurations each object stored is
// notified as an upload is, once PutMany is done.
func (s *Server) PutMany(bucket string, objs iter.Seq[Seed]) (int, error) {
	if !s.bucketExists(bucket) {
		return 0, fmt.Errorf("put many in %s: %w", bucket, ErrBucketNotFound)
	}
	if w := s.watchObjects(bucket); w != nil {
		// Notified: the state of each name is recorded as it comes,
		// before its batch is stored (notifywatch.go).
		defer func() { s.settle(w, true) }()
		seeds := objs
		objs = func(yield func(Seed) bool) {
			for o := range seeds {
				w.add(s, o.Name)
				if !yield(o) {
					return
				}
			}
		}
	}
	s.putMu.Lock()
	defer s.putMu.Unlock()
	inFake, err := s.fakeNames(bucket)
	if err != nil {
		return 0, err
	}
	n := 0
	batch := make([]Seed, 0, seedBatch)
	flush := func() error {
		err := s.seedBatchLocked(bucket, batch, inFake)
		batch = batch[:0]
		return err
	}
	for o := range objs {
		if o.Name == "" || len(o.Name) > MaxObjectName {
			if err := flush(); err != nil {
				return n, err
			}
			return n, fmt.Errorf("put many in %s: object name of %d bytes (1 to %d)", bucket, len(o.Name), MaxObjectName)
		}
		batch = append(batch, o)
		n++
		if len(batch) == seedBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// fakeNames returns the names of the live objects the fake holds in
// bucket (so that PutMany can tell, without a scan per name, which ones
// must stay there).
func (s *Server) fakeNames(bucket string) (map[string]bool, error) {
	attrs, err := s.fake.Backend().ListObjects(bucket, "", false)
	if err != nil {
		return nil, fmt.Errorf("put many in %s: %w (%v)", bucket, ErrBucketNotFound, err)
	}
	names := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		names[a.Name] = true
	}
	return names, nil
}

// seedBatchLocked stores batch. A name the fake holds gets its new
// version in the fake (a name lives in one store only). The caller holds
// putMu.
func (s *Server) seedBatchLocked(bucket string, batch []Seed, inFake map[string]bool) error {
	if len(batch) == 0 {
		return nil
	}
	// Checksums outside seedMu: they are the only work proportional to
	// the data.
	objs := make([]*seedObject, len(batch))
	for i, b := range batch {
		objs[i] = &seedObject{name: b.Name, data: b.Data, contentType: b.ContentType,
			crc32c: crc32.Checksum(b.Data, castagnoli), md5: md5.Sum(b.Data)}
	}
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	t := s.seeded[bucket]
	if t == nil {
		t = btree.NewG(seedDegree, seedLess)
		s.seeded[bucket] = t
	}
	for _, o := range objs {
		if inFake[o.name] {
			if _, err := s.putFakeLocked(bucket, o.name, o.data, o.contentType); err != nil {
				return err
			}
			continue
		}
		var cur int64
		if old, ok := t.Get(o); ok {
			cur = old.gen
		}
		o.gen = s.nextGenerationLocked(cur)
		o.created = time.Now().UnixMicro()
		t.ReplaceOrInsert(o)
	}
	return nil
}

// seedPutLocked reports whether Put stores bucket/name in the seeded
// store (Options.Seeded): the bucket is seeded, keeps no versions, and
// the fake does not hold the name. The caller holds putMu and seedMu.
func (s *Server) seedPutLocked(bucket, name string) bool {
	if !s.seedPuts || s.seeded[bucket] == nil {
		return false
	}
	if b, err := s.fake.Backend().GetBucket(bucket); err != nil || b.VersioningEnabled {
		return false
	}
	_, err := s.fakeGeneration(bucket, name)
	return err != nil
}

// seedOneLocked stores a new version of bucket/name in the seeded store
// and returns its generation. The caller holds putMu and seedMu.
func (s *Server) seedOneLocked(bucket, name string, data []byte) int64 {
	t := s.seeded[bucket]
	o := &seedObject{name: name, data: data, crc32c: crc32.Checksum(data, castagnoli), md5: md5.Sum(data)}
	var cur int64
	if old, ok := t.Get(o); ok {
		cur = old.gen
	}
	o.gen = s.nextGenerationLocked(cur)
	o.created = time.Now().UnixMicro()
	t.ReplaceOrInsert(o)
	return o.gen
}

// putFakeLocked stores a new version of bucket/name in the fake, with a
// generation above the live one's. The caller holds putMu, and seedMu if
// the bucket may be seeded.
func (s *Server) putFakeLocked(bucket, name string, data []byte, contentType string) (int64, error) {
	cur, _ := s.fakeGeneration(bucket, name)
	gen := s.nextGenerationLocked(cur)
	obj := fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{
			BucketName:  bucket,
			Name:        name,
			Generation:  gen,
			ContentType: contentType,
		},
		Content: data,
	}
	if err := s.fake.CreateObjectStreaming(obj.StreamingObject()); err != nil {
		return 0, fmt.Errorf("put %s/%s: %w", bucket, name, err)
	}
	return gen, nil
}

// attrs returns o as the fake's object attributes would be, had it been
// uploaded there.
func (o *seedObject) attrs(bucket string) fakestorage.ObjectAttrs {
	t := time.UnixMicro(o.created)
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], o.crc32c)
	md5b64 := base64.StdEncoding.EncodeToString(o.md5[:])
	return fakestorage.ObjectAttrs{
		BucketName:   bucket,
		Name:         o.name,
		Size:         int64(len(o.data)),
		ContentType:  o.contentType,
		Crc32c:       base64.StdEncoding.EncodeToString(crc[:]),
		Md5Hash:      md5b64,
		Etag:         md5b64,
		StorageClass: "STANDARD",
		Generation:   o.gen,
		Created:      t,
		Updated:      t,
	}
}

// promote moves bucket/name from the seeded store into the fake, keeping
// its generation, content, checksums and times, before a request that
// the fake answers touches it. A name that is not seeded is left alone.
func (s *Server) promote(bucket, name string) error {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	return s.promoteLocked(bucket, name)
}

func (s *Server) promoteLocked(bucket, name string) error {
	o := s.lookupSeedLocked(bucket, name)
	if o == nil {
		return nil
	}
	obj := fakestorage.Object{ObjectAttrs: o.attrs(bucket), Content: o.data}
	if err := s.fake.CreateObjectStreaming(obj.StreamingObject()); err != nil {
		return fmt.Errorf("promote %s/%s: %w", bucket, name, err)
	}
	s.seeded[bucket].Delete(o)
	return nil
}

// promotePrefix promotes every seeded object of bucket whose name starts
// with prefix (a folder call works on the fake's objects alone).
func (s *Server) promotePrefix(bucket, prefix string) error {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	t := s.seeded[bucket]
	if t == nil {
		return nil
	}
	var names []string
	t.AscendGreaterOrEqual(seedKey(prefix), func(o *seedObject) bool {
		if !strings.HasPrefix(o.name, prefix) {
			return false
		}
		names = append(names, o.name)
		return true
	})
	for _, n := range names {
		if err := s.promoteLocked(bucket, n); err != nil {
			return err
		}
	}
	return nil
}

// deleteSeed removes bucket/name from the seeded store and reports
// whether it was there.
func (s *Server) deleteSeed(bucket, name string) bool {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	t := s.seeded[bucket]
	if t == nil {
		return false
	}
	_, ok := t.Delete(seedKey(name))
	return ok
}

// SeededObjects returns how many objects of bucket the seeded store holds
// (those PutMany stored and no request has touched since).
func (s *Server) SeededObjects(bucket string) int {
	s.seedMu.RLock()
	defer s.seedMu.RUnlock()
	if t := s.seeded[bucket]; t != nil {
		return t.Len()
	}
	return 0
}
