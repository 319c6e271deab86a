package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
)

// The journal keeps what a cluster member must know of raft together with
// the state raft's entries built, in the same batches (see doc.go):
//
//	key           value
//	------------  ----------------------------------------------------------
//	"m/applied"   CRC (4B) | index (8B) | term (8B), big-endian: the raft
//	              index and term of the last log entry applied
//	"m/cluster"   CRC (4B) | revd.raft.v1.ClusterState: the members, the
//	              ids of removed members, raft's configuration
//
// Each CRC is CRC-32C (Castagnoli), big-endian, over the key followed by the
// rest of the value. A journal that never applied an entry has neither key
// (Applied answers the zero value, ClusterState nil).
// RaftWALDir and RaftSnapDir are the subdirectories of a data directory
// where a cluster member keeps raft's write-ahead log (etcd's wal package)
// and raft's snapshots (etcd's snap package); Open leaves them alone.
const (
	RaftWALDir  = "wal"
	RaftSnapDir = "snap"
)

var (
	keyApplied = []byte("m/applied")
	keyCluster = []byte("m/cluster")
)

// Applied is the raft index and term of the last log entry a journal
// applied.
type Applied struct {
	Index, Term uint64
}

// checkedValue returns key's CRC followed by payload.
func checkedValue(key, payload []byte) []byte {
	v := make([]byte, crcLen, crcLen+len(payload))
	v = append(v, payload...)
	binary.BigEndian.PutUint32(v, crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload))
	return v
}

// checkedPayload checks v's CRC against key and returns its payload. Errors
// wrap ErrCorrupt.
func checkedPayload(key, v []byte) ([]byte, error) {
	if len(v) < crcLen {
		return nil, fmt.Errorf("%w: %s: value of %d bytes", ErrCorrupt, key, len(v))
	}
	stored := binary.BigEndian.Uint32(v)
	if computed := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v[crcLen:]); stored != computed {
		return nil, fmt.Errorf("%w: %s: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, key, stored, computed)
	}
	return v[crcLen:], nil
}

// SetApplied records that the batch applies raft's log up to a.
func (b *Batch) SetApplied(a Applied) {
	p := binary.BigEndian.AppendUint64(make([]byte, 0, 16), a.Index)
	p = binary.BigEndian.AppendUint64(p, a.Term)
	v := checkedValue(keyApplied, p)
	b.op(func() error {
		if err := b.pb.Set(keyApplied, v, nil); err != nil {
			return fmt.Errorf("journal: set applied index: %w", err)
		}
		return nil
	})
}

// SetClusterState records the membership (an encoded
// revd.raft.v1.ClusterState, which the journal only checksums).
func (b *Batch) SetClusterState(state []byte) {
	v := checkedValue(keyCluster, state)
	b.op(func() error {
		if err := b.pb.Set(keyCluster, v, nil); err != nil {
			return fmt.Errorf("journal: set cluster state: %w", err)
		}
		return nil
	})
}

// Applied returns the raft index and term the journal applied last; zero if
// it never applied an entry. A damaged value wraps ErrCorrupt.
func (j *Journal) Applied() (Applied, error) {
	p, err := j.getChecked(keyApplied)
	if err != nil || p == nil {
		return Applied{}, err
	}
	if len(p) != 16 {
		return Applied{}, fmt.Errorf("%w: %s: %d bytes, want 16", ErrCorrupt, keyApplied, len(p))
	}
	return Applied{Index: binary.BigEndian.Uint64(p), Term: binary.BigEndian.Uint64(p[8:])}, nil
}

// ClusterState returns the encoded revd.raft.v1.ClusterState last set, nil
// if none was. A damaged value wraps ErrCorrupt.
func (j *Journal) ClusterState() ([]byte, error) {
	return j.getChecked(keyCluster)
}

// getChecked reads key's checksummed value; nil if absent.
func (j *Journal) getChecked(key []byte) ([]byte, error) {
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	defer j.life.exit()
	v, closer, err := j.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, readErr("read "+string(key), err)
	}
	defer closer.Close()
	p, err := checkedPayload(key, v)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}
