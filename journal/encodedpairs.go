package journal

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// EncodedPairs returns the pairs Pairs would return, in protobuf's wire
// format: out[i] is the pair ref(i) names as the length-delimited field
// number field, the way a message holding them in a repeated field (a
// RangeResponse's kvs) encodes them, so that out's elements written one
// after the other are that field. A pair read from its record is copied as
// the record holds it, already encoded (the journal writes pairs as
// proto.Marshal does), and checked as Pairs checks it: a range's answer
// costs no decoding, no KeyValue per pair and one encoding less. The
// elements share a few large buffers, filled in the order the records are
// read. Errors are Pairs' errors.
func (j *Journal) EncodedPairs(field protowire.Number, n int, ref func(i int) (key string, rev int64)) ([][]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	defer j.life.exit()
	out, err := j.encodedPairs(field, n, ref)
	if err != nil {
		return nil, j.corrupt(err)
	}
	return out, nil
}

// encodedPairs is EncodedPairs inside the journal's life.
func (j *Journal) encodedPairs(field protowire.Number, n int, ref func(i int) (key string, rev int64)) ([][]byte, error) {
	out := make([][]byte, n)
	if n == 1 {
		key, rev := ref(0)
		p, err := j.encodedPair(field, key, rev)
		out[0] = p
		return out, err
	}
	var a fieldArena
	folded, err := j.readRecords(n, ref, func(i int32, kvb []byte, _ kvFields) error {
		out[i] = a.add(field, kvb)
		return nil
	})
	if err != nil || len(folded) == 0 {
		return out, err
	}
	// Pairs the compactor folded into the base snapshot: read as Pairs
	// reads them, and encoded.
	kvs := make([]*mvccpb.KeyValue, n)
	if err := j.basePairs(folded, ref, kvs); err != nil {
		return nil, err
	}
	for _, i := range folded {
		b, err := proto.Marshal(kvs[i])
		if err != nil {
			return nil, err
		}
		out[i] = a.add(field, b)
	}
	return out, nil
}

// encodedPair is encodedPairs of one pair: from the pair cache, or
// lookupPair into a buffer of its own, which the cache then keeps (unless
// it is a pooled one, given back once sent).
func (j *Journal) encodedPair(field protowire.Number, key string, rev int64) (out []byte, err error) {
	ref := pairRef{key: key, rev: rev, field: field}
	if f := j.pairCache.get(ref); f != nil {
		return f, nil
	}
	err = j.lookupPair(key, rev,
		func(kvb []byte, _ kvFields) error { out = newField(field, kvb); return nil },
		func(kv *mvccpb.KeyValue) error {
			b, err := proto.Marshal(kv)
			out = newField(field, b)
			return err
		})
	if err == nil && len(out) < PooledFieldBytes {
		j.pairCache.add(ref, out)
	}
	return out, err
}

// newField returns b as the length-delimited field number field, in a
// buffer of its own: of its size, or from the pool for a field of
// PooledFieldBytes or more (fieldpool.go).
func newField(field protowire.Number, b []byte) []byte {
	need := protowire.SizeTag(field) + protowire.SizeBytes(len(b))
	var dst []byte
	if need >= PooledFieldBytes {
		dst = pooledBuffer(need)
	} else {
		dst = make([]byte, 0, need)
	}
	return protowire.AppendBytes(protowire.AppendTag(dst, field, protowire.BytesType), b)
}

// fieldArena hands out encoded fields from buffers it allocates, each
// twice the size of the one before, from 4 KiB to 1 MiB: many small fields
// take a few allocations, and no buffer is copied into a larger one as a
// single growing buffer would be. A field of a quarter of the largest
// buffer or more (PooledFieldBytes) gets a buffer of its own, from the
// pool (fieldpool.go), so that the room a buffer leaves unused (what the
// guard, counting the answer's bytes, does not see) stays a fraction of
// what it holds.
type fieldArena struct{ buf []byte }

const (
	arenaFirst = 4 << 10
	arenaMax   = 1 << 20
	arenaAlone = arenaMax / 4
)

// add appends b as the length-delimited field number field, and returns
// the field (its capacity ends with it).
func (a *fieldArena) add(field protowire.Number, b []byte) []byte {
	need := protowire.SizeTag(field) + protowire.SizeBytes(len(b))
	if need >= arenaAlone {
		return newField(field, b)
	}
	if cap(a.buf)-len(a.buf) < need {
		a.buf = make([]byte, 0, max(need, min(arenaMax, max(arenaFirst, 2*cap(a.buf)))))
	}
	start := len(a.buf)
	a.buf = protowire.AppendBytes(protowire.AppendTag(a.buf, field, protowire.BytesType), b)
	return a.buf[start:len(a.buf):len(a.buf)]
}
