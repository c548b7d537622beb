package fs

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
	set := f.nodes[name]
	if set == nil {
		set = map[*fileNode]struct{}{}
		f.nodes[name] = set
	}
	set[n] = struct{}{}
	f.nodesMu.Unlock()
}

// untrack forgets node n under name.
func (f *FS) untrack(n *fileNode, name string) {
	f.nodesMu.Lock()
	if set := f.nodes[name]; set != nil {
		delete(set, n)
		if len(set) == 0 {
			delete(f.nodes, name)
		}
	}
	f.nodesMu.Unlock()
}

// nodesNamed returns the nodes the kernel has for object name.
func (f *FS) nodesNamed(name string) []*fileNode {
	f.nodesMu.Lock()
	defer f.nodesMu.Unlock()
	out := make([]*fileNode, 0, len(f.nodes[name]))
	for n := range f.nodes[name] {
		out = append(out, n)
	}
	return out
}

// OnForget implements gofs.NodeOnForgetter: the kernel dropped the node.
func (n *fileNode) OnForget() { n.fsys.untrack(n, n.objName()) }
