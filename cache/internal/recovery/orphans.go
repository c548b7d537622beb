package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// Placing data files that no record names (at every start, and for all of
// them when index.db was lost or damaged and is rebuilt).
//
// The rule: no data file that may hold bytes not in the bucket is ever
// deleted. A file without a record is
//   - removed if another link of its inode is kept (a rename's hard link),
//     if its description says its bytes are in the bucket (clean, or
//     dropped from the index), or if it holds no bytes at all;
//   - adopted as its name's record again if its description says it has
//     local state (changed content, a deletion, a metadata change, a
//     pending copy) and it is the newest file of that name (the highest
//     ID: IDs only grow);
//   - otherwise moved to CACHE_DIR/lost+found, with a note beside it
//     (FILE.json) saying why and what it was, and an error in the log.

// LostFoundDir is the directory, in the cache directory, of data files
// that could not be placed.
const LostFoundDir = "lost+found"

// diskFile is one file found in data/.
type diskFile struct {
	name   string // file name in data/
	id     uint64 // the record ID its name says; 0 if it is not an ID
	dev    uint64
	ino    uint64
	size   int64
	blocks int64 // allocated 512-byte blocks: 0 means it holds no bytes
	desc   *durable.Description
}

// scanData lists data/ with each file's inode and description.
func scanData(dataDir string) ([]diskFile, error) {
	des, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, err
	}
	files := make([]diskFile, 0, len(des))
	for _, de := range des {
		path := filepath.Join(dataDir, de.Name())
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		f := diskFile{name: de.Name(), dev: uint64(st.Dev), ino: st.Ino, size: st.Size, blocks: st.Blocks}
		if id, err := strconv.ParseUint(de.Name(), 16, 64); err == nil && strconv.FormatUint(id, 16) == de.Name() {
			f.id = id
		}
		f.desc, _ = durable.ReadDescription(path) // unreadable: as none
		files = append(files, f)
	}
	return files, nil
}

// undescribed returns the IDs of the data files among files that carry
// no description.
func undescribed(files []diskFile) map[uint64]bool {
	bare := map[uint64]bool{}
	for _, f := range files {
		if f.desc == nil && f.id != 0 {
			bare[f.id] = true
		}
	}
	return bare
}

// lostFile is a data file for lost+found, and why.
type lostFile struct {
	f      diskFile
	reason string
}

// Plan says what becomes of the data files without a record.
type Plan struct {
	Adopt       map[string]durable.Record // name -> record made from a file's description
	unseat      map[string]durable.Record // name -> its record that an adopted one replaces
	remove      []diskFile                // hold no bytes that are not in the bucket or in another link
	lost        []lostFile
	MaxID       uint64          // the highest ID among the files
	Trimmed     []string        // adopted names whose description had lost its metadata (Partial)
	Undescribed map[uint64]bool // IDs of the files found without a description (Place)
}

// Drops is how many files without a record the plan removes.
func (p *Plan) Drops() int { return len(p.remove) }

// ForLostFound is how many files the plan moves to lost+found.
func (p *Plan) ForLostFound() int { return len(p.lost) }

// Place scans dataDir and decides the fate of its files against recs,
// the records of the index (the journal replayed): the files no record
// names, and those of the records that an adopted one replaces. Records
// whose file is missing are left to the caller.
func Place(recs map[string]durable.Record, dataDir string, chunkSize int64) (Plan, error) {
	files, err := scanData(dataDir)
	if err != nil {
		return Plan{}, err
	}
	p := planOrphans(withFile(recs, files), files, chunkSize)
	p.unseated()
	p.Undescribed = undescribed(files)
	return p, nil
}

// withFile returns the records of recs whose data file is among files.
func withFile(recs map[string]durable.Record, files []diskFile) map[string]durable.Record {
	onDisk := map[uint64]bool{}
	for _, f := range files {
		onDisk[f.id] = true
	}
	with := make(map[string]durable.Record, len(recs))
	for name, r := range recs {
		if onDisk[r.ID] {
			with[name] = r
		}
	}
	return with
}

// planOrphans decides the fate of the files no record of recs names.
// recs must hold only records whose file exists.
func planOrphans(recs map[string]durable.Record, files []diskFile, chunkSize int64) Plan {
	p := Plan{Adopt: map[string]durable.Record{}, unseat: map[string]durable.Record{}}
	named := map[uint64]bool{}
	for _, r := range recs {
		named[r.ID] = true
	}
	type inode struct{ dev, ino uint64 }
	groups := map[inode][]int{}
	var inodes []inode
	for i, f := range files {
		p.MaxID = max(p.MaxID, f.id)
		if f.id == 0 {
			switch {
			case strings.HasPrefix(f.name, ".probe-") || strings.HasPrefix(f.name, ".detach-") || f.blocks == 0:
				p.remove = append(p.remove, f) // this cache's temporary files, or nothing in it
			default:
				p.lost = append(p.lost, lostFile{f, "its name is not a cache file ID"})
			}
			continue
		}
		k := inode{f.dev, f.ino}
		if groups[k] == nil {
			inodes = append(inodes, k)
		}
		groups[k] = append(groups[k], i)
	}
	claims := map[string][]int{}
	for _, k := range inodes {
		g := groups[k]
		keep := -1
		for _, i := range g {
			if named[files[i].id] {
				keep = i
			}
		}
		if keep < 0 {
			keep = claimant(files, g)
		}
		for _, i := range g {
			if i != keep && !named[files[i].id] {
				p.remove = append(p.remove, files[i]) // another link keeps the bytes
			}
		}
		if named[files[keep].id] {
			continue
		}
		f := files[keep]
		switch {
		case f.desc == nil && f.blocks == 0:
			p.remove = append(p.remove, f)
		case f.desc == nil:
			p.lost = append(p.lost, lostFile{f, "it has no description (written by an older bucketfs, or the disk keeps no extended attributes)"})
		case !f.desc.Dirty || f.desc.Dropped:
			p.remove = append(p.remove, f) // its bytes are in the bucket
		default:
			claims[f.desc.Name] = append(claims[f.desc.Name], keep)
		}
	}
	for name, c := range claims {
		sort.Slice(c, func(a, b int) bool { return files[c[a]].id > files[c[b]].id })
		if r, ok := recs[name]; !ok || r.ID < files[c[0]].id {
			f := files[c[0]]
			p.Adopt[name] = f.desc.Record(f.id, f.size, chunkSize)
			if f.desc.Partial {
				p.Trimmed = append(p.Trimmed, name)
			}
			if ok {
				p.unseat[name] = r
			}
			c = c[1:]
		}
		for _, i := range c {
			f := files[i]
			if f.desc.LocalContent() {
				p.lost = append(p.lost, lostFile{f, fmt.Sprintf("a newer version of %q is in the cache", name)})
			} else {
				p.remove = append(p.remove, f) // a deletion, or the bucket's content
			}
		}
	}
	return p
}

// claimant picks, among the links of one inode, the one its description
// names, else the highest ID.
func claimant(files []diskFile, g []int) int {
	best := g[0]
	for _, i := range g {
		if d := files[i].desc; d != nil && d.ID == files[i].id {
			return i
		}
		if files[i].id > files[best].id {
			best = i
		}
	}
	return best
}

// lostNote is written beside a file moved to lost+found.
type lostNote struct {
	File        string               `json:"file"`
	Reason      string               `json:"reason"`
	MovedAt     time.Time            `json:"moved_at"`
	Description *durable.Description `json:"description,omitempty"`
}

// moveToLostFound moves data file f to dir/lost+found (never deletes it)
// and logs it. It returns the new path.
func moveToLostFound(dir string, f diskFile, reason string, log *slog.Logger) (string, error) {
	lf := filepath.Join(dir, LostFoundDir)
	if err := os.MkdirAll(lf, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(lf, f.name)
	for n := 2; ; n++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(lf, fmt.Sprintf("%s-%d", f.name, n))
	}
	if err := os.Rename(filepath.Join(dir, "data", f.name), dst); err != nil {
		return "", err
	}
	note, _ := json.MarshalIndent(lostNote{File: f.name, Reason: reason, MovedAt: time.Now().UTC(), Description: f.desc}, "", "  ")
	if err := os.WriteFile(dst+".json", append(note, '\n'), 0o600); err != nil {
		log.Warn("writing the note beside a file in lost+found failed", "file", dst, "err", err)
	}
	object := ""
	if f.desc != nil {
		object = f.desc.Name
	}
	log.Error("a cache file that could not be placed was moved to lost+found: it may hold changes that are not in the bucket; check it and copy it back into the mount by hand",
		"file", dst, "object", object, "reason", reason)
	return dst, nil
}

// SaveLost links the data file id of cache directory dir into its
// lost+found, under a name that says the object (name, escaped to one
// path component) and the time, and returns its path: the bytes of a
// changed file an operator gave up for the bucket's version
// (cache.Resolve) stay there until a person removes them.
func SaveLost(dir, name string, id uint64) (string, error) {
	lf := filepath.Join(dir, LostFoundDir)
	if err := os.MkdirAll(lf, 0o700); err != nil {
		return "", err
	}
	base := strings.NewReplacer("/", "%2F", "%", "%25").Replace(name)
	if len(base) > 200 {
		base = base[:200]
	}
	p := filepath.Join(lf, fmt.Sprintf("%s.%x.%s", base, id, time.Now().UTC().Format("20060102T150405Z")))
	if err := os.Link(durable.DataPath(filepath.Join(dir, "data"), id), p); err != nil {
		return "", err
	}
	return p, nil
}

// Settle carries out the removals and moves of p in the cache directory
// dir (after the index holds p's adopted records). It returns how many
// files went to lost+found.
func (p *Plan) Settle(dir string, log *slog.Logger) int {
	for _, f := range p.remove {
		if err := os.Remove(filepath.Join(dir, "data", f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("removing a cache file no record names failed", "file", f.name, "err", err)
		}
	}
	lost := 0
	for _, l := range p.lost {
		if _, err := moveToLostFound(dir, l.f, l.reason, log); err != nil {
			log.Error("moving a cache file that could not be placed to lost+found failed; it stays in data/", "file", l.f.name, "err", err)
			continue
		}
		lost++
	}
	return lost
}

// unseated returns the files of records that adopted ones replace, to
// be settled like files without a record: kept in lost+found if they
// hold local changes.
func (p *Plan) unseated() {
	for name, r := range p.unseat {
		f := diskFile{name: strconv.FormatUint(r.ID, 16), id: r.ID}
		if r.LocalContent() {
			p.lost = append(p.lost, lostFile{f, fmt.Sprintf("a newer version of %q was found in the cache", name)})
		} else {
			p.remove = append(p.remove, f)
		}
	}
}

// CountAdopted sums up the adopted records for the log.
func (p *Plan) CountAdopted() (changed, deleted, other int) {
	for _, r := range p.Adopt {
		switch {
		case r.Deleted:
			deleted++
		case r.LocalContent():
			changed++
		default:
			other++
		}
	}
	return
}

// FsckHint is the command that checks and repairs the cache in dir.
func FsckHint(dir string) string {
	return fmt.Sprintf("bucketfs fsck --cache-dir %s --rebuild", dir)
}
