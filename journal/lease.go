package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"

	"github.com/cockroachdb/pebble/v2"
)

// Lease keys (see the layout in doc.go): "l/" + the lease id as 8 bytes
// big-endian (the id's two's-complement bits), holding
//
//	+-----------+----------------------------+
//	| CRC (4B)  | TTL (8B, big-endian int64) |
//	+-----------+----------------------------+
//
// where the CRC is CRC-32C (Castagnoli), big-endian, over the 8 id bytes of
// the key followed by the 8 TTL bytes, so a value under the wrong key fails
// the check. A key exists from the batch that granted the lease to the
// batch that revoked it (or recorded its expiry). Keys attached to a lease
// are not stored here: they are the keys whose KeyValue.lease names it.
// Deadlines are not stored either: they are not durable in etcd (without
// lease checkpoints) and a restart gives every lease its full TTL again.
const (
	leaseKeyLen   = len(leasePrefix) + 8
	leaseValueLen = crcLen + 8
)

var (
	leasesLower = []byte(leasePrefix)
	leasesUpper = []byte{leasePrefix[0], leasePrefix[1] + 1}
)

// LeaseRecord is one durable lease.
type LeaseRecord struct {
	ID  int64
	TTL int64 // granted TTL in seconds
}

func leaseKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, leaseKeyLen), leasePrefix...), uint64(id))
}

func leaseValue(id, ttl int64) []byte {
	v := make([]byte, leaseValueLen)
	binary.BigEndian.PutUint64(v[crcLen:], uint64(ttl))
	binary.BigEndian.PutUint32(v, leaseCRC(id, v[crcLen:]))
	return v
}

func leaseCRC(id int64, ttl []byte) uint32 {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(id))
	return crc32.Update(crc32.Checksum(k[:], castagnoli), castagnoli, ttl)
}

// decodeLease checks and decodes a lease key and value. Errors wrap
// ErrCorrupt and name the lease.
func decodeLease(k, v []byte) (LeaseRecord, error) {
	if len(k) != leaseKeyLen || string(k[:len(leasePrefix)]) != leasePrefix {
		return LeaseRecord{}, fmt.Errorf("%w: malformed lease key %q", ErrCorrupt, k)
	}
	id := int64(binary.BigEndian.Uint64(k[len(leasePrefix):]))
	if id == 0 {
		return LeaseRecord{}, fmt.Errorf("%w: lease key with id 0", ErrCorrupt)
	}
	if len(v) != leaseValueLen {
		return LeaseRecord{}, fmt.Errorf("%w: lease %016x: value of %d bytes, want %d", ErrCorrupt, id, len(v), leaseValueLen)
	}
	if stored, computed := binary.BigEndian.Uint32(v), leaseCRC(id, v[crcLen:]); stored != computed {
		return LeaseRecord{}, fmt.Errorf("%w: lease %016x: checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, id, stored, computed)
	}
	return LeaseRecord{ID: id, TTL: int64(binary.BigEndian.Uint64(v[crcLen:]))}, nil
}

// PutLease records lease id with its granted TTL when the batch commits. It
// may follow or precede records in the same batch; within the batch, the
// last PutLease or DeleteLease of an id wins.
func (b *Batch) PutLease(id, ttl int64) {
	b.leaseOp(id, func(k []byte) error { return b.pb.Set(k, leaseValue(id, ttl), nil) })
}

// DeleteLease removes lease id when the batch commits (a revoke or an
// expiry; its keys' DELETE events go in a record of the same batch).
func (b *Batch) DeleteLease(id int64) {
	b.leaseOp(id, func(k []byte) error { return b.pb.Delete(k, nil) })
}

func (b *Batch) leaseOp(id int64, op func(k []byte) error) {
	if id == 0 {
		b.fail(fmt.Errorf("journal: lease id 0"))
		return
	}
	b.op(func() error {
		if err := op(leaseKey(id)); err != nil {
			return fmt.Errorf("journal: lease %016x: %w", id, err)
		}
		return nil
	})
}

// Leases iterates over the durable leases, in the order of their keys
// (ids as unsigned big-endian numbers), from a point-in-time view. A damaged
// entry is yielded as an error wrapping ErrCorrupt, after which the
// iteration stops.
func (j *Journal) Leases() iter.Seq2[LeaseRecord, error] {
	return func(yield func(LeaseRecord, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(LeaseRecord{}, err)
			return
		}
		defer j.life.exit()
		it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: leasesLower, UpperBound: leasesUpper})
		if err != nil {
			yield(LeaseRecord{}, j.corrupt(readErr("read leases", err)))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if j.life.stopping.Load() {
				yield(LeaseRecord{}, ErrClosed)
				return
			}
			v, err := it.ValueAndErr()
			if err != nil {
				yield(LeaseRecord{}, j.corrupt(readErr("read leases", err)))
				return
			}
			l, err := decodeLease(it.Key(), v)
			if err != nil {
				yield(LeaseRecord{}, j.corrupt(err))
				return
			}
			if !yield(l, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(LeaseRecord{}, j.corrupt(readErr("read leases", err)))
		}
	}
}
