package journal

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// ErrNoPair is returned (wrapped) by Pair when the journal does not hold the
// pair asked for: its revision was compacted away, or never put that key.
var ErrNoPair = errors.New("journal: no such pair")

// Pair returns the key-value pair that the put at revision rev wrote to
// key: from that revision's record, or, once the record was folded, from the
// base snapshot (which holds it as long as nothing overwrote the key up to
// the base revision). It is how the in-memory index fetches values it no
// longer holds.
func (j *Journal) Pair(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	defer j.life.exit()
	kv, err := j.pair(key, rev)
	return kv, j.corrupt(err)
}

func (j *Journal) pair(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	snap := j.db.NewSnapshot()
	defer snap.Close()
	v, closer, err := snap.Get(recordKey(rev))
	switch {
	case err == nil:
		rec, derr := decodeRecordValue(rev, v)
		closer.Close()
		if derr != nil {
			return nil, derr
		}
		for _, ev := range rec.Events {
			if ev.Type == mvccpb.Event_PUT && bytes.Equal(ev.Kv.Key, key) {
				return ev.Kv, nil
			}
		}
		return nil, fmt.Errorf("%w: revision %d did not put %q", ErrNoPair, rev, key)
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, readErr(fmt.Sprintf("read record %d", rev), err)
	}
	v, closer, err = snap.Get(baseKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q at revision %d is neither in a record nor in the base snapshot", ErrNoPair, key, rev)
	}
	if err != nil {
		return nil, readErr(fmt.Sprintf("read base entry %q", key), err)
	}
	defer closer.Close()
	kv, err := decodeBaseValue(baseKey(key), v)
	if err != nil {
		return nil, err
	}
	if kv.ModRevision != rev {
		return nil, fmt.Errorf("%w: the base snapshot holds %q at revision %d, not %d", ErrNoPair, key, kv.ModRevision, rev)
	}
	return kv, nil
}
