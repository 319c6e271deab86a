package watch

// group indexes watchers by what they watch, so that the watchers of an
// event are found without looking at the others: single keys in a map,
// ranges in an interval tree (etcd's watcherGroup does the same).
type group struct {
	keys   map[string]map[*watcher]struct{}
	ranges intervalTree[*watcher]
	size   int
}

func newGroup() *group { return &group{keys: map[string]map[*watcher]struct{}{}} }

func (g *group) add(w *watcher) {
	g.size++
	if w.end == nil {
		set := g.keys[string(w.key)]
		if set == nil {
			set = map[*watcher]struct{}{}
			g.keys[string(w.key)] = set
		}
		set[w] = struct{}{}
		return
	}
	g.ranges.insert(w.key, w.end, w)
}

func (g *group) remove(w *watcher) bool {
	if w.end == nil {
		set := g.keys[string(w.key)]
		if _, ok := set[w]; !ok {
			return false
		}
		delete(set, w)
		if len(set) == 0 {
			delete(g.keys, string(w.key))
		}
		g.size--
		return true
	}
	if g.ranges.remove(w.key, w) {
		g.size--
		return true
	}
	return false
}

// match calls f for every watcher whose key or range holds key.
func (g *group) match(key []byte, f func(*watcher)) {
	for w := range g.keys[string(key)] {
		f(w)
	}
	if g.ranges.len() > 0 {
		g.ranges.stab(key, f)
	}
}

func (g *group) len() int { return g.size }

// each calls f for every watcher.
func (g *group) each(f func(*watcher)) {
	for _, set := range g.keys {
		for w := range set {
			f(w)
		}
	}
	eachNode(g.ranges.root, f)
}

func eachNode(n *itNode[*watcher], f func(*watcher)) {
	if n == nil {
		return
	}
	eachNode(n.left, f)
	f(n.val)
	eachNode(n.right, f)
}
