package etcdkv

import (
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/projections/mvcc"
)

// StoreTxn is a WriteView over the sequencer's mvcc.Overlay: every write
// goes straight into the store at the revision after the one the
// transaction began at, and the changes are collected as the events of that
// revision, in the order they were made. The store's revision moves on at
// the first write, so reads within the transaction see its earlier writes.
//
// A write reads what the index knows of the key (its create revision and
// version), never its value: the events carry no PrevKv (watchers that ask
// for prev_kv read it at the revision before, as etcd's do).
type StoreTxn struct {
	st      *mvcc.Overlay
	begin   int64
	changes []*mvccpb.Event
	first   [1]*mvccpb.Event // changes' first array: most writes change one key
}

// NewStoreTxn begins a write transaction on st.
func NewStoreTxn(st *mvcc.Overlay) *StoreTxn {
	t := &StoreTxn{st: st, begin: st.Rev()}
	t.changes = t.first[:0]
	return t
}

// putEvent is a put's event and its pair, allocated together.
type putEvent struct {
	ev mvccpb.Event
	kv mvccpb.KeyValue
}

// Rev is the revision reads see: the beginning one, or the new one once
// something was written.
func (t *StoreTxn) Rev() int64 {
	if len(t.changes) > 0 {
		return t.begin + 1
	}
	return t.begin
}

// CompactRev is the store's compaction revision.
func (t *StoreTxn) CompactRev() int64 { return t.st.CompactRev() }

// Range reads the store.
func (t *StoreTxn) Range(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	return t.st.Range(key, end, rev, limit)
}

// RangeKeys reads the store's index.
func (t *StoreTxn) RangeKeys(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	return t.st.RangeKeys(key, end, rev, limit)
}

// Count counts in the store.
func (t *StoreTxn) Count(key, end []byte, rev int64) (int64, error) {
	return t.st.Count(key, end, rev)
}

// Put writes key: version and create revision continue the key's current
// generation, or start a new one.
func (t *StoreTxn) Put(key, value []byte, lease int64) int64 {
	rev := t.begin + 1
	create, ver := rev, int64(1)
	if prev := t.st.Latest(key); prev.Rev != 0 {
		create, ver = prev.Created, prev.Version+1
	}
	p := new(putEvent)
	kv := &p.kv
	kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease = key, value, create, rev, ver, lease
	p.ev.Type, p.ev.Kv = mvccpb.Event_PUT, kv
	t.st.Put(kv)
	t.changes = append(t.changes, &p.ev)
	return rev
}

// DeleteRange tombstones the keys alive in the range.
func (t *StoreTxn) DeleteRange(key, end []byte) (int64, int64) {
	kvs, _, err := t.st.RangeKeys(key, end, 0, 0)
	if err != nil {
		panic("etcdkv: reading the current revision failed: " + err.Error())
	}
	rev := t.begin + 1
	for _, kv := range kvs {
		t.st.Tombstone(kv.Key, rev)
		t.changes = append(t.changes, &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: kv.Key, ModRevision: rev}})
	}
	return int64(len(kvs)), t.Rev()
}

// Changed reports whether the transaction wrote anything.
func (t *StoreTxn) Changed() bool { return len(t.changes) > 0 }

// Events are the changes made, in order: the events of revision Rev().
// They carry no PrevKv (see StoreTxn).
func (t *StoreTxn) Events() []*mvccpb.Event { return t.changes }
