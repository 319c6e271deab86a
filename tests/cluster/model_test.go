package cluster

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The model the cluster's history is checked against (with porcupine): the
// KV store a single etcd is, as far as the operations the clients run can
// tell. keys keys; every change makes one new revision. An operation that
// failed may or may not have taken effect (the client cannot know), so
// the model is nondeterministic for those.

const keys = 3

// kvState is the store: each key's value and mod revision (0: absent),
// and the store's revision. It is a comparable value, as porcupine wants.
type kvState struct {
	rev  int64
	vals [keys]string
	mods [keys]int64
}

type opKind int

const (
	opPut opKind = iota
	opGet
	opDelete
	opTxn // if mod(key) == cmpMod then put(key, value) else get(key)
)

type kvInput struct {
	kind   opKind
	key    int
	value  string
	cmpMod int64
}

type kvOutput struct {
	failed    bool // the client got an error: the outcome is unknown
	rev       int64
	value     string // get, and the txn's else branch
	mod       int64
	found     bool
	deleted   int64
	succeeded bool // txn
}

func (s kvState) put(k int, v string) kvState {
	s.rev++
	s.vals[k], s.mods[k] = v, s.rev
	return s
}

func stepKV(st, in, out any) []any {
	s, i, o := st.(kvState), in.(kvInput), out.(kvOutput)
	// What the operation does to s, and what it answers.
	next, want := s, kvOutput{}
	switch i.kind {
	case opPut:
		next = s.put(i.key, i.value)
		want.rev = next.rev
	case opGet:
		want = kvOutput{rev: s.rev, value: s.vals[i.key], mod: s.mods[i.key], found: s.mods[i.key] != 0}
	case opDelete:
		if s.mods[i.key] != 0 {
			next.rev++
			next.vals[i.key], next.mods[i.key] = "", 0
			want.deleted = 1
		}
		want.rev = next.rev
	case opTxn:
		if s.mods[i.key] == i.cmpMod {
			next = s.put(i.key, i.value)
			want = kvOutput{rev: next.rev, succeeded: true}
		} else {
			want = kvOutput{rev: s.rev, value: s.vals[i.key], mod: s.mods[i.key], found: s.mods[i.key] != 0}
		}
	}
	if o.failed {
		if i.kind == opGet {
			return []any{s}
		}
		return []any{s, next}
	}
	if o != want {
		return nil
	}
	return []any{next}
}

var kvModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{kvState{rev: 1}} },
	Step: stepKV,
	DescribeOperation: func(in, out any) string {
		i, o := in.(kvInput), out.(kvOutput)
		return fmt.Sprintf("%v k%d %q mod=%d -> %+v", i.kind, i.key, i.value, i.cmpMod, o)
	},
}).ToModel()
