package fs

// Inode numbers. A name's number is computed from what it is, not kept
// in a table: a directory's from its prefix, a file's from its object
// name and generation (the version: the same object looked up twice is
// one inode, a new version is another file). So a walk of ten million
// names costs no memory here, and the numbers are the same after the
// kernel forgot a node, and across mounts.
//
// Two cases need more than the hash:
//   - a number not yet tied to a version (a file created here, not yet
//     uploaded: generation 0) is fresh, from a counter;
//   - a node whose identity moved on while the kernel holds it (renamed,
//     or holding a newer version after an upload) keeps its number, and
//     a later lookup of the old identity must not get that node: go-fuse
//     hands out the node it holds for a number. Such numbers are retired
//     until the node is forgotten, and a lookup that would use one gets
//     a fresh number instead.
//
// Hashed numbers have the top two bits clear, fresh ones have the second
// set: they never meet, and both are positive as signed 64-bit numbers
// (Java's, for one). Two names of one mount whose hashes meet (about 2^-62 for
// a pair) would share an inode while both are held; that risk is taken
// for a table-free walk. Numbers are 64-bit: a 32-bit program built
// without large-file support gets EOVERFLOW from stat (docs/design.md,
// limits).

import "github.com/bucketfs/bucketfs/transfer"

const (
	freshInoBit = 1 << 62
	hashInoMask = freshInoBit - 1
)

// hashIno is the number of (kind, name, gen): FNV-1a over the bytes,
// then a finalizer (splitmix64's) so that names differing in their last
// byte spread over all bits; 62 bits, never 0 or 1 (1 is the root).
func hashIno(kind byte, name string, gen int64) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	h = (h ^ uint64(kind)) * prime
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	for i := 0; i < 8; i++ {
		h = (h ^ uint64(byte(gen>>(8*i)))) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	h &= hashInoMask
	if h < 2 {
		h += 2
	}
	return h
}

// freshIno returns a number no other node of the mount has.
func (f *FS) freshIno() uint64 { return freshInoBit | f.nextIno.Add(1) }

// dirIno is the number of directory prefix ("" is the root), unless that
// number is retired.
func (f *FS) dirIno(prefix string) uint64 {
	if prefix == "" {
		return 1
	}
	return f.unlessRetired(hashIno('d', prefix, 0))
}

// fileIno is the inode number for a file node of object version a: the
// same for the same version in the bucket, so that looking it up twice
// finds one inode; a fresh one for a file not yet in the bucket
// (generation 0), since such a name can be renamed away and created
// again.
func (f *FS) fileIno(a transfer.ObjectAttrs) uint64 {
	if a.Generation <= 0 {
		return f.freshIno()
	}
	return f.unlessRetired(hashIno('f', a.Name, a.Generation))
}

// listedIno is the number a directory listing shows for a file the
// kernel has no node of (d_ino, plain READDIR): its hash, with no look
// at the retired numbers, so that a listing of 100,000 names takes no
// lock per name. A lookup decides the inode's number (fileIno).
func (f *FS) listedIno(a transfer.ObjectAttrs) uint64 {
	if a.Generation <= 0 {
		return f.freshIno()
	}
	return hashIno('f', a.Name, a.Generation)
}

func (f *FS) unlessRetired(ino uint64) uint64 {
	f.mu.Lock()
	_, retired := f.retired[ino]
	f.mu.Unlock()
	if retired {
		return f.freshIno()
	}
	return ino
}

// retire records that the node numbered ino no longer is what its number
// was computed from (renamed, or holding another version): until the
// kernel forgets it (unretire), that number is not handed out.
func (f *FS) retire(ino uint64) {
	if ino&freshInoBit != 0 || ino == 1 {
		return // fresh numbers are never computed again
	}
	f.mu.Lock()
	f.retired[ino] = struct{}{}
	f.mu.Unlock()
}

// unretire: the kernel forgot the node numbered ino.
func (f *FS) unretire(ino uint64) {
	f.mu.Lock()
	delete(f.retired, ino)
	f.mu.Unlock()
}
