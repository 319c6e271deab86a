package watch

import (
	"bytes"
	"math/rand/v2"
)

// intervalTree holds key ranges [begin, end) (end nil or empty: no upper
// bound) and answers stabbing queries: every range containing a key, in
// O(log n + matches). It is a treap ordered by begin, each node augmented
// with the largest end below it.
type intervalTree[V comparable] struct {
	root *itNode[V]
	n    int
}

type itNode[V comparable] struct {
	begin, end  []byte
	val         V
	prio        uint64
	maxEnd      []byte // nil: unbounded
	left, right *itNode[V]
}

// endLess compares range ends where nil means +infinity.
func endLess(a, b []byte) bool {
	if a == nil {
		return false
	}
	if b == nil {
		return true
	}
	return bytes.Compare(a, b) < 0
}

func (n *itNode[V]) fix() {
	n.maxEnd = n.end
	if n.left != nil && endLess(n.maxEnd, n.left.maxEnd) {
		n.maxEnd = n.left.maxEnd
	}
	if n.right != nil && endLess(n.maxEnd, n.right.maxEnd) {
		n.maxEnd = n.right.maxEnd
	}
}

func normEnd(end []byte) []byte {
	if len(end) == 0 {
		return nil
	}
	return end
}

// insert adds the range [begin, end) with its value.
func (t *intervalTree[V]) insert(begin, end []byte, v V) {
	nd := &itNode[V]{begin: begin, end: normEnd(end), val: v, prio: rand.Uint64()}
	nd.fix()
	t.root = t.insertAt(t.root, nd)
	t.n++
}

func (t *intervalTree[V]) insertAt(root, nd *itNode[V]) *itNode[V] {
	if root == nil {
		return nd
	}
	if bytes.Compare(nd.begin, root.begin) < 0 {
		root.left = t.insertAt(root.left, nd)
		if root.left.prio > root.prio {
			root = rotateRight(root)
		}
	} else {
		root.right = t.insertAt(root.right, nd)
		if root.right.prio > root.prio {
			root = rotateLeft(root)
		}
	}
	root.fix()
	return root
}

func rotateRight[V comparable](n *itNode[V]) *itNode[V] {
	l := n.left
	n.left = l.right
	l.right = n
	n.fix()
	l.fix()
	return l
}

func rotateLeft[V comparable](n *itNode[V]) *itNode[V] {
	r := n.right
	n.right = r.left
	r.left = n
	n.fix()
	r.fix()
	return r
}

// remove deletes the range with this begin and value; it reports whether it
// was there.
func (t *intervalTree[V]) remove(begin []byte, v V) bool {
	var found bool
	t.root, found = t.removeAt(t.root, begin, v)
	if found {
		t.n--
	}
	return found
}

func (t *intervalTree[V]) removeAt(n *itNode[V], begin []byte, v V) (*itNode[V], bool) {
	if n == nil {
		return nil, false
	}
	var found bool
	c := bytes.Compare(begin, n.begin)
	switch {
	case c == 0 && n.val == v:
		return merge(n.left, n.right), true
	case c < 0:
		n.left, found = t.removeAt(n.left, begin, v)
	default:
		// Equal begins may sit on either side after rotations.
		n.right, found = t.removeAt(n.right, begin, v)
		if !found && c == 0 {
			n.left, found = t.removeAt(n.left, begin, v)
		}
	}
	n.fix()
	return n, found
}

func merge[V comparable](a, b *itNode[V]) *itNode[V] {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = merge(a.right, b)
		a.fix()
		return a
	default:
		b.left = merge(a, b.left)
		b.fix()
		return b
	}
}

// stab calls f for every range containing key.
func (t *intervalTree[V]) stab(key []byte, f func(V)) {
	stabAt(t.root, key, f)
}

func stabAt[V comparable](n *itNode[V], key []byte, f func(V)) {
	for n != nil {
		// Nothing below n ends after key.
		if !endLess(key, n.maxEnd) {
			return
		}
		stabAt(n.left, key, f)
		if bytes.Compare(n.begin, key) > 0 {
			// n and everything to its right begin after key.
			return
		}
		if endLess(key, n.end) {
			f(n.val)
		}
		n = n.right
	}
}

func (t *intervalTree[V]) len() int { return t.n }
