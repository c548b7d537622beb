package fs

import "slices"

// The file nodes the kernel holds, by object name. A rename or an unlink
// must reach the node the kernel uses for the name, and go-fuse's tree
// of children is not a safe way to find it: a lookup that answers with
// another inode (a new version) puts a new node in the tree under the
// name while the kernel may go on using the old one (found by the model
// tester: a file renamed while its old node stayed named after the old
// name wrote its next bytes into a deleted file). So the file system
// keeps its own index, updated by every change of a node's name.
// nodesMu is held only around the map (LOCK ORDER, fs.go).

// track records that the kernel has node n for its object name.
func (f *FS) track(n *fileNode) {
	name := n.objName()
	f.nodesMu.Lock()
	if ns := f.nodes[name]; !slices.Contains(ns, n) {
		f.nodes[name] = append(ns, n)
	}
	f.nodesMu.Unlock()
}

// untrack forgets node n under name.
func (f *FS) untrack(n *fileNode, name string) {
	f.nodesMu.Lock()
	if ns := slices.DeleteFunc(f.nodes[name], func(o *fileNode) bool { return o == n }); len(ns) == 0 {
		delete(f.nodes, name)
	} else {
		f.nodes[name] = ns
	}
	f.nodesMu.Unlock()
}

// nodesNamed returns the nodes the kernel has for object name.
func (f *FS) nodesNamed(name string) []*fileNode {
	f.nodesMu.Lock()
	defer f.nodesMu.Unlock()
	return slices.Clone(f.nodes[name])
}

// OnForget implements gofs.NodeOnForgetter: the kernel dropped the node.
func (n *fileNode) OnForget() {
	n.fsys.untrack(n, n.objName())
	n.fsys.forgotten(&n.clockLink, n.ino)
}

// OnForget implements gofs.NodeOnForgetter: the kernel dropped the node.
func (d *dirNode) OnForget() { d.fsys.forgotten(&d.clockLink, d.StableAttr().Ino) }

// OnForget implements gofs.NodeOnForgetter: the kernel dropped the node.
func (s *symlinkNode) OnForget() { s.fsys.forgotten(&s.clockLink, s.ino) }

// forgotten is told of every node the kernel forgot: its number may be
// handed out again, and the clock has one node less (reclaim.go).
func (f *FS) forgotten(l *clockLink, ino uint64) {
	f.unretire(ino)
	f.clock.remove(l)
}

// What the clock asks of the nodes (clockNode, reclaim.go).

func (n *fileNode) clockBusy() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ptOpen > 0 || n.cacheOpen > 0 || len(n.writers) > 0 || len(n.lazies) > 0
}
func (n *fileNode) clockDir() bool { return false }

// clockDropped: go-fuse answered the lookup that made n with another
// node, so the kernel never had n: it leaves the index of names.
func (n *fileNode) clockDropped() { n.fsys.untrack(n, n.objName()) }

func (d *dirNode) clockBusy() bool     { return false }
func (d *dirNode) clockDir() bool      { return true }
func (d *dirNode) clockDropped()       {}
func (s *symlinkNode) clockBusy() bool { return false }
func (s *symlinkNode) clockDir() bool  { return false }
func (s *symlinkNode) clockDropped()   {}
