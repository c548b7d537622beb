package names

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
	bolt "go.etcd.io/bbolt"
)

// names.db keeps what the store knows across mounts (CACHE_DIR/names.db,
// apart from the cache's index: losing it costs requests, never data).
//
// Schema (version 1):
//
//	meta/   "version" -> "1", "bucket" -> the bucket's name,
//	        "names" -> the names held (uvarint),
//	        "session" -> the number of the last open (uvarint),
//	        "trusted" -> the first session whose records are trusted
//	        (uvarint; absent: all)
//	names/  GROUP \x00 KIND REST -> uvarint(names in the value) + JSON
//	        KIND 'l': the listing of GROUP (REST empty); 'e': the entry
//	        of GROUP+REST; 'p': the placeholder GROUP+REST (ending in '/');
//	        each with "s", the session that wrote it
//	groups/ GROUP -> 8 bytes of unix seconds last used + uvarint names
//
// A group is read whole with one cursor (its keys share GROUP \x00).
// Times are stored as when the bucket was asked: what is trusted till
// when follows from the TTL of the mount that reads them.
//
// Writes are queued (queue, under Cache.mu: no I/O) and committed in
// batches by one goroutine (run), at most one commit per batchEvery, off
// the request path. NoSync is not used: each commit's two fdatasyncs cost
// the writer a few milliseconds a few times a second at most, and they
// keep the file consistent across a power loss, so that a start needs no
// full check of the file (which would cost the mount-ready time with
// many names).
//
// Locks: disk.rw is held shared by a load across its read of the file
// and its application of the ops not yet written (inflight, pending),
// and exclusively by the writer across a commit and the clearing of
// inflight: a load sees each op either in the file or in the queue, never
// in neither. Order: disk.rw, then Cache.mu, then disk.qmu (a leaf).
type disk struct {
	db       *bolt.DB
	path     string
	ttl      time.Duration
	maxNames int // names kept in the file; the least recently used groups go past it
	log      *slog.Logger

	rw sync.RWMutex

	qmu      sync.Mutex
	pending  []op // guarded by qmu: queued, not yet taken by the writer
	inflight []op // guarded by qmu: being committed

	// session numbers this open; records written by sessions before
	// trusted are unverified (see unverified in lookup.go): asked again
	// before they are used. An open that finds the last mount did not
	// close the file (a crash: what it queued last may be missing, a
	// drop after a rename the bucket made, say) sets trusted to its own
	// session, durably: a later clean close vouches only for what its
	// session wrote, never for the crashed mount's records left unread.
	session, trusted uint64

	failed   atomic.Bool // the file could not be read or written: memory only from then on
	closed   atomic.Bool // close began: loads find nothing (not damage)
	failOnce sync.Once
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

var (
	metaKey        = []byte("meta")
	namesKey       = []byte("names")
	groupsKey      = []byte("groups")
	versionKey     = []byte("version")
	bucketKey      = []byte("bucket")
	countKey       = []byte("names")
	cleanKey       = []byte("clean") // present while no mount has the file open
	sessionKey     = []byte("session")
	trustedKey     = []byte("trusted")
	diskVersion    = []byte("1")
	errOtherBucket = errors.New("names.db belongs to another bucket")
)

// batchEvery spaces the writer's commits, so that a storm of answers is
// written in a few transactions.
const batchEvery = 200 * time.Millisecond

// DBName is the file, in the cache directory, that keeps names across
// mounts.
const DBName = "names.db"

// openDisk opens (or creates) dir/names.db for bucket. A file that cannot
// be opened or read, or that belongs to another bucket, is moved aside
// with one warning and a new one started.
func openDisk(dir, bucket string, ttl time.Duration, maxNames int, log *slog.Logger) (*disk, error) {
	path := filepath.Join(dir, DBName)
	db, ss, err := openDB(path, bucket)
	if err != nil && !errors.Is(err, bolt.ErrTimeout) && !errors.Is(err, fs.ErrPermission) {
		aside := fmt.Sprintf("%s.bad-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("%v; moving it aside: %w", err, rerr)
		}
		log.Warn("names.db could not be used: moved aside, starting with no names remembered (this costs requests, never data)",
			"err", err, "moved_to", aside)
		db, ss, err = openDB(path, bucket)
	}
	if err != nil {
		return nil, err
	}
	d := &disk{db: db, path: path, ttl: ttl, maxNames: maxNames, log: log, session: ss.session, trusted: ss.trusted,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d, nil
}

// protect runs fn, turning a panic or a fault in the mapped file (which
// bbolt meets on a damaged one) into an error.
func protect(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("names.db is damaged: %v", p)
		}
	}()
	return fn()
}

// sessions is what openDB found and set: this open's session number and
// the first session whose records are trusted.
type sessions struct{ session, trusted uint64 }

// openDB opens names.db, clears its clean marker and numbers this
// session; if the last mount did not set the marker (and the file holds
// names), no record written before this session is trusted any more.
func openDB(path, bucket string) (db *bolt.DB, ss sessions, err error) {
	err = protect(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
		if err != nil {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		return db.Update(func(tx *bolt.Tx) error {
			if tx.Size() > st.Size() {
				return fmt.Errorf("names.db is %d bytes long, shorter than its pages (%d)", st.Size(), tx.Size())
			}
			if err := initSchema(tx, bucket); err != nil {
				return err
			}
			meta := tx.Bucket(metaKey)
			k, _ := tx.Bucket(namesKey).Cursor().First()
			unclean := k != nil && meta.Get(cleanKey) == nil
			ss.session = uvarint(meta.Get(sessionKey)) + 1
			ss.trusted = uvarint(meta.Get(trustedKey))
			if unclean {
				ss.trusted = ss.session
				if err := meta.Put(trustedKey, binary.AppendUvarint(nil, ss.trusted)); err != nil {
					return err
				}
			}
			if err := meta.Put(sessionKey, binary.AppendUvarint(nil, ss.session)); err != nil {
				return err
			}
			return meta.Delete(cleanKey)
		})
	})
	if err != nil && db != nil {
		_ = protect(db.Close)
		db = nil
	}
	return db, ss, err
}

// uvarint decodes v (0 if absent or unreadable).
func uvarint(v []byte) uint64 {
	n, _ := binary.Uvarint(v)
	return n
}

func initSchema(tx *bolt.Tx, bucket string) error {
	meta, err := tx.CreateBucketIfNotExists(metaKey)
	if err != nil {
		return err
	}
	if v := meta.Get(versionKey); v != nil && string(v) != string(diskVersion) {
		return fmt.Errorf("names.db has version %s, this bucketfs reads %s", v, diskVersion)
	}
	if b := meta.Get(bucketKey); b != nil && string(b) != bucket {
		return fmt.Errorf("%w (%q, not %q)", errOtherBucket, b, bucket)
	}
	for _, k := range [][]byte{namesKey, groupsKey} {
		if _, err := tx.CreateBucketIfNotExists(k); err != nil {
			return err
		}
	}
	if err := meta.Put(versionKey, diskVersion); err != nil {
		return err
	}
	return meta.Put(bucketKey, []byte(bucket))
}

// HasNamespace says whether cacheDir's names.db holds names of bucket:
// what a mount could show with the bucket away. It opens the file
// read-only and closes it again.
func HasNamespace(cacheDir, bucket string) (bool, error) {
	path := filepath.Join(cacheDir, DBName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	has := false
	err := protect(func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			meta, names := tx.Bucket(metaKey), tx.Bucket(namesKey)
			if meta == nil || names == nil || string(meta.Get(bucketKey)) != bucket {
				return nil
			}
			k, _ := names.Cursor().First()
			has = k != nil
			return nil
		})
	})
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	return has, nil
}

// queue adds o to what the writer commits next. Called under Cache.mu.
func (d *disk) queue(o op) {
	if d == nil || d.failed.Load() {
		return
	}
	d.qmu.Lock()
	d.pending = append(d.pending, o)
	d.qmu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// fail stops using the file after damage found in it; it is moved aside
// at close. One warning.
func (d *disk) fail(err error) {
	d.failed.Store(true)
	d.failOnce.Do(func() {
		d.log.Warn("names.db is damaged: names are no longer remembered on disk by this mount; it is moved aside at unmount (this costs requests, never data)",
			"path", d.path, "err", err)
	})
}

// run is the writer: it commits what is queued, at most once per
// batchEvery, until close.
func (d *disk) run() {
	defer close(d.done)
	for {
		select {
		case <-d.kick:
		case <-d.stop:
			d.commit()
			return
		}
		d.commit()
		select {
		case <-time.After(batchEvery):
		case <-d.stop:
			d.commit()
			return
		}
	}
}

// close drains the queue and closes the file (moving it aside if it was
// found damaged).
func (d *disk) close() {
	if d == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.rw.Lock() // no load is reading the file
	d.closed.Store(true)
	d.rw.Unlock()
	if !d.failed.Load() {
		_ = protect(func() error {
			return d.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(metaKey).Put(cleanKey, []byte(time.Now().UTC().Format(time.RFC3339)))
			})
		})
	}
	_ = protect(d.db.Close)
	if d.failed.Load() {
		os.Rename(d.path, d.path+".bad-"+time.Now().UTC().Format("20060102T150405Z"))
	}
}

// commit writes the queued ops in one transaction, then evicts the least
// recently used groups if the file holds too many names.
func (d *disk) commit() {
	d.qmu.Lock()
	batch := d.pending
	d.pending, d.inflight = nil, batch
	d.qmu.Unlock()
	if len(batch) == 0 {
		return
	}
	d.rw.Lock()
	defer d.rw.Unlock()
	var total int
	if !d.failed.Load() {
		err := protect(func() error {
			return d.db.Update(func(tx *bolt.Tx) error {
				w := newWriter(tx)
				w.session = d.session
				if err := w.applyAll(batch); err != nil {
					return err
				}
				total = w.finish()
				return nil
			})
		})
		if err != nil {
			d.fail(err)
		}
	}
	d.qmu.Lock()
	d.inflight = nil
	d.qmu.Unlock()
	if total > d.maxNames && !d.failed.Load() {
		if err := protect(d.evict); err != nil {
			d.fail(err)
		}
	}
}

// evict drops the least recently used groups until the file holds at
// most nine tenths of maxNames names. Called with rw held.
func (d *disk) evict() error {
	return d.db.Update(func(tx *bolt.Tx) error {
		type used struct {
			g     string
			at    uint64
			names int
		}
		var all []used
		err := tx.Bucket(groupsKey).ForEach(func(k, v []byte) error {
			at, n := decodeGroupMeta(v)
			all = append(all, used{string(k), at, n})
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(all, func(i, j int) bool { return all[i].at < all[j].at })
		w := newWriter(tx)
		for _, u := range all {
			if w.total <= d.maxNames*9/10 {
				break
			}
			if err := w.dropGroup(u.g); err != nil {
				return err
			}
		}
		w.finish()
		return nil
	})
}

// load reads group g from the file and applies the ops not yet written
// there; nil if the file holds nothing of it. Called with rw held shared.
func (d *disk) load(g string) (*group, error) {
	gr := &group{prefix: g, entries: map[string]cachedEntry{}, placeholders: map[string]placeholder{}}
	if d.failed.Load() || d.closed.Load() {
		return gr, nil
	}
	err := protect(func() error {
		return d.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(namesKey).Cursor()
			pfx := []byte(g + "\x00")
			for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
				if err := d.decodeInto(gr, k[len(pfx):], v); err != nil {
					return fmt.Errorf("record %q: %w", k, err)
				}
			}
			return nil
		})
	})
	return gr, err
}

// unwritten applies to gr the ops queued and not yet in the file. Called
// with rw held shared.
func (d *disk) unwritten(gr *group) {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	for _, ops := range [][]op{d.inflight, d.pending} {
		for _, o := range ops {
			if o.touches(gr.prefix) {
				o.applyTo(gr)
			}
		}
	}
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

// Records as stored. Times are unix nanoseconds of when the bucket was
// asked.
type (
	entryRec struct {
		Kind  Kind                  `json:"k"`
		Attrs *transfer.ObjectAttrs `json:"a,omitempty"`
		Asked int64                 `json:"t,omitempty"`
		S     uint64                `json:"s,omitempty"` // the session that wrote it (not in a listing's children)
	}
	listingRec struct {
		Fetched  int64               `json:"t"`
		Children map[string]entryRec `json:"c,omitempty"`
		Hidden   map[string]entryRec `json:"h,omitempty"`
		S        uint64              `json:"s,omitempty"`
	}
	placeholderRec struct {
		Attrs  transfer.ObjectAttrs `json:"a"`
		Exists bool                 `json:"x,omitempty"`
		Asked  int64                `json:"t"`
		S      uint64               `json:"s,omitempty"`
	}
)

func toRec(c Entry, asked time.Time) entryRec {
	r := entryRec{Kind: c.Kind}
	if c.Kind == File {
		a := c.Attrs
		r.Attrs = &a
	}
	if !asked.IsZero() {
		r.Asked = asked.UnixNano()
	}
	return r
}

func (r entryRec) entry() Entry {
	c := Entry{Kind: r.Kind}
	if r.Attrs != nil {
		c.Attrs = *r.Attrs
	}
	return c
}

// encode returns the stored value of o's put, written by session: the
// names it holds and the record (JSON; a listing in its binary form,
// listingcodec.go). A value still unverified (loaded after a
// crash and changed here without asking the bucket, as Confirmed does
// to a listing) keeps session 0, never trusted after a crash: this
// session does not vouch for the rest of it.
func encode(o op, session uint64) ([]byte, error) {
	var v any
	n := 1
	vouch := func(expires time.Time) uint64 {
		if unverified(expires) {
			return 0
		}
		return session
	}
	switch {
	case o.entry != nil:
		r := toRec(o.entry.Entry, o.entry.asked)
		r.S = vouch(o.entry.expires)
		v = r
	case o.listing != nil:
		l := o.listing
		out := binary.AppendUvarint(make([]byte, 0, listingSize(l, o.key)), uint64(n+l.Len()))
		return encodeListing(out, l, o.key, vouch(l.expires)) // listingcodec.go
	case o.placeholder != nil:
		p := o.placeholder
		v = placeholderRec{Attrs: p.a, Exists: p.exists, Asked: p.asked.UnixNano(), S: vouch(p.expires)}
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(binary.AppendUvarint(nil, uint64(n)), js...), nil
}

// decodeInto adds the record under key rest (KIND REST) to gr.
func (d *disk) decodeInto(gr *group, rest, v []byte) error {
	if len(rest) == 0 {
		return errors.New("no kind")
	}
	_, k := binary.Uvarint(v)
	if k <= 0 {
		return errors.New("no count")
	}
	js := v[k:]
	name := gr.prefix + string(rest[1:])
	switch rest[0] {
	case 'e':
		var r entryRec
		if err := json.Unmarshal(js, &r); err != nil {
			return err
		}
		asked := time.Unix(0, r.Asked)
		gr.entries[name] = cachedEntry{Entry: r.entry(), asked: asked, expires: d.expiry(asked, r.S)}
	case 'l':
		if len(js) > 0 && js[0] == listingBinary {
			l, session, err := decodeListing(js) // listingcodec.go
			if err != nil {
				return err
			}
			l.expires = d.expiry(l.fetched, session)
			gr.listing = l
			return nil
		}
		var r listingRec // the JSON form, written before 2026-11-28
		if err := json.Unmarshal(js, &r); err != nil {
			return err
		}
		gr.listing = r.listing()
		gr.listing.expires = d.expiry(gr.listing.fetched, r.S)
	case 'p':
		var r placeholderRec
		if err := json.Unmarshal(js, &r); err != nil {
			return err
		}
		asked := time.Unix(0, r.Asked)
		gr.placeholders[name] = placeholder{a: r.Attrs, exists: r.Exists, asked: asked, expires: d.expiry(asked, r.S)}
	default:
		return fmt.Errorf("unknown kind %q", rest[0])
	}
	return nil
}

// expiry is when a record asked at asked, written by session, stops
// being trusted: past the TTL; if written before a crash (a session
// before trusted), never trusted without asking (zero, see unverified).
func (d *disk) expiry(asked time.Time, session uint64) time.Time {
	if session < d.trusted {
		return time.Time{}
	}
	return asked.Add(d.ttl)
}

func (r listingRec) listing() *Listing {
	children := make(map[string]Entry, len(r.Children))
	for k, c := range r.Children {
		children[k] = c.entry()
	}
	var hidden map[string]Entry
	if len(r.Hidden) > 0 {
		hidden = map[string]Entry{}
		for k, c := range r.Hidden {
			hidden[k] = c.entry()
		}
	}
	return newListing(children, time.Unix(0, r.Fetched), time.Time{}, hidden)
}
