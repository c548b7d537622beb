package pending

// A Change is what a name of the index stands for now, as its owner
// tells it from the name's entry: the queries of the local overlay below
// ask it of each name they step over.
type Change int8

const (
	Clean   Change = iota // no change left, or no copy: the name counts for nothing
	Written               // a local version not yet in the bucket: the name is present
	Deleted               // a deletion not yet in the bucket: the name is removed
)

// Changes returns the names under prefix with changes not yet in the
// bucket, sorted: those Written (present) and those Deleted (removed).
// It drops the Clean ones from the index (Prune). It costs a binary
// search and the names under prefix, not a walk of every name: lookups
// call it for every name.
func (n *Names) Changes(prefix string, change func(name string) Change) (present, removed []string) {
	n.Prune(prefix, func(name string) bool {
		switch change(name) {
		case Written:
			present = append(present, name)
		case Deleted:
			removed = append(removed, name)
		default:
			return false // clean or gone since: dropped from the index
		}
		return true
	})
	return present, removed
}

// ChangedUnder reports whether a name under prefix, prefix itself aside,
// has changes not yet in the bucket (is not Clean).
func (n *Names) ChangedUnder(prefix string, change func(name string) Change) bool {
	for name := range n.Under(prefix) {
		if name != prefix && change(name) != Clean {
			return true
		}
	}
	return false
}

// SubdirChanges returns the subdirectories of directory prefix (their
// names in it) that changes not yet in the bucket make or remove:
// present, those holding a name Written; removed, those holding none
// whose placeholder ("prefix/seg/") is Deleted. A directory's link count
// comes from it (fs), and the kernel asks for that after every create in
// the directory: it costs a binary search per subdirectory (Subdirs),
// and the names under each until one is Written (all of them, when every
// name under a subdirectory is deleted), not the names directly in
// prefix. A subdirectory whose names are all Clean is still in the index
// until Changes drops them: its names are asked here.
func (n *Names) SubdirChanges(prefix string, change func(name string) Change) (present, removed []string) {
	for sub := range n.Subdirs(prefix) {
		seg := sub[len(prefix) : len(sub)-1]
		switch n.subdirChange(sub, change) {
		case Written:
			present = append(present, seg)
		case Deleted:
			removed = append(removed, seg)
		}
	}
	return present, removed
}

// subdirChange is Written if a name under directory sub is, else Deleted
// if sub's placeholder is, else Clean.
func (n *Names) subdirChange(sub string, change func(name string) Change) Change {
	gone := Clean
	for name := range n.Under(sub) {
		switch c := change(name); {
		case c == Written:
			return Written
		case c == Deleted && name == sub:
			gone = Deleted
		}
	}
	return gone
}
