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
func (n *fileNode) OnForget() { n.fsys.untrack(n, n.objName()) }
