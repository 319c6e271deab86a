package server

import (
	"bytes"
	"context"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"

	"revd/actors/shard"
	"revd/internal/etcdkv"
	"revd/journal"
	"revd/projections/mvcc"
	"revd/projections/statehash"
	"revd/server/maintenance"
)

// reader is the read path: Range, read-only Txns, RangeStream, the state
// hash and the watch hub's prev_kv read the shards at one revision that
// every shard has applied, and never touch the sequencer (see the package
// doc). The shards index the keys; the values come from the journal.
type reader struct {
	set *shard.Set
	j   *journal.Journal
	// committed and compactRev are the server's: the newest durable
	// revision and compaction (-1: none).
	committed, compactRev *atomic.Int64
}

// view pins the revision a read sees: the committed revision when it
// began, once every shard has applied it. Writes are acknowledged once
// durable, before the shards apply them, so a serializable read waits too:
// it then sees every write acknowledged before it, as on etcd (which
// applies before it answers). A single server has nothing cheaper to offer
// a serializable read; the wait is for at most one batch's apply.
//
// A compaction accepted while the read waits may be above that revision
// (a compaction revision is at most the committed one); the read then moves
// up to the committed revision again, so that a read of the current state
// is never refused as compacted.
func (r *reader) view(ctx context.Context) (*shard.View, error) {
	tr := r.set.Tracker()
	rev := r.committed.Load()
	for {
		if err := tr.Wait(ctx, rev); err != nil {
			return nil, toStatus(err)
		}
		compactRev := r.compactRev.Load()
		if compactRev <= rev {
			return r.set.View(rev, compactRev), nil
		}
		rev = r.committed.Load()
	}
}

// read runs f on a view from view, and again on a fresh view if f failed
// while a compaction past the view's was accepted: a shard may then have
// compacted its index past the view's revision (compacted), or the
// compactor folded away a journal record the read had to load (a load
// error), though the request asked for nothing compacted when it began. A
// request whose own revision is below the new compaction then fails as
// compacted, as it would on etcd after that compaction.
func (r *reader) read(ctx context.Context, f func(*shard.View) error) error {
	for {
		v, err := r.view(ctx)
		if err != nil {
			return err
		}
		err = f(v)
		if err == nil || r.compactRev.Load() <= v.CompactRev() {
			return err
		}
	}
}

// rangeShards reads a checked RangeRequest from the shards through read;
// the header holds only the revision.
func (r *reader) rangeShards(ctx context.Context, req *pb.RangeRequest) (resp *pb.RangeResponse, err error) {
	err = r.read(ctx, func(v *shard.View) error {
		resp, err = etcdkv.Range(v, req)
		return err
	})
	return resp, err
}

// rangeShardsEncoded is rangeShards with the pairs encoded
// (etcdkv.RangeEncoded).
func (r *reader) rangeShardsEncoded(ctx context.Context, req *pb.RangeRequest) (er etcdkv.EncodedRange, err error) {
	err = r.read(ctx, func(v *shard.View) error {
		er, err = etcdkv.RangeEncoded(v, req)
		return err
	})
	return er, err
}

// journalValues are the values the indexes point at (mvcc.Values): the
// journal holds every put's pair, read through Pebble's block cache.
type journalValues struct{ j *journal.Journal }

func (v journalValues) Pairs(refs []mvcc.Ref, kvs []*mvccpb.KeyValue) error {
	return v.j.Pairs(len(refs), func(i int) (string, int64) { return refs[i].Key, refs[i].Rev }, kvs)
}

func (v journalValues) EncodedPairs(field protowire.Number, refs []mvcc.Ref) ([][]byte, error) {
	return v.j.EncodedPairs(field, len(refs), func(i int) (string, int64) { return refs[i].Key, refs[i].Rev })
}

// prevAt returns key's value at rev, for prev_kv of events replayed from the
// journal: nil if it had none or rev is compacted.
func (r *reader) prevAt(key []byte, rev int64) *mvccpb.KeyValue {
	if rev < 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := r.set.Tracker()
	if err := tr.Wait(ctx, rev); err != nil {
		return nil
	}
	kvs, _, err := r.set.View(tr.Visible(), r.compactRev.Load()).Range(key, nil, rev, 0)
	if err != nil || len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// StateHash is the state hash of the keys alive at one revision.
type StateHash = maintenance.StateHash

// StateHash hashes the key-value pairs alive at rev, read from the key-shard
// projections, with package statehash: the same hash revctl journal verify
// computes offline from a data directory, so the two can be compared. rev
// <= 0 means the newest committed revision, read linearizably. It fails
// with rpctypes.ErrGRPCFutureRev above the committed revision and
// rpctypes.ErrGRPCCompacted below the compaction revision.
//
// It reads the pairs in key order, stateHashChunk keys at a time (each
// chunk's values read from the journal in one call), all at one revision,
// so that it holds one chunk's values at a time whatever the store's size.
func (s *Server) StateHash(ctx context.Context, rev int64) (StateHash, error) {
	return s.reads.stateHash(ctx, rev)
}

// stateHashChunk is how many keys StateHash reads at a time.
const stateHashChunk = 10000

func (r *reader) stateHash(ctx context.Context, rev int64) (StateHash, error) {
	for {
		h, err, again := r.stateHashOnce(ctx, rev)
		if !again {
			return h, err
		}
	}
}

// stateHashOnce hashes every chunk at one view's revision; again says a
// compaction overtook it between chunks (a read the caller may retry, as
// read retries one chunk).
func (r *reader) stateHashOnce(ctx context.Context, rev int64) (_ StateHash, _ error, again bool) {
	v, err := r.view(ctx)
	if err != nil {
		return StateHash{}, err, false
	}
	at := rev
	if rev <= 0 {
		at = v.Rev()
	}
	hasher := statehash.New()
	key := []byte{0}
	for {
		kvs, _, err := v.Range(key, []byte{}, at, stateHashChunk)
		if err != nil {
			if r.compactRev.Load() > v.CompactRev() && rev <= 0 {
				return StateHash{}, nil, true
			}
			return StateHash{}, etcdkv.ToGRPC(err), false
		}
		for _, kv := range kvs {
			if err := hasher.Add(kv); err != nil {
				return StateHash{}, err, false
			}
		}
		if len(kvs) < stateHashChunk {
			break
		}
		key = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
	return StateHash{Revision: at, Keys: hasher.Count(), Sum: hasher.Sum()}, nil, false
}
