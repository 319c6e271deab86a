package mvcc

import (
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ErrLoad is returned (wrapped) by reads whose Values failed to fetch a
// pair.
var ErrLoad = errors.New("mvcc: cannot load a value")

// Ref names a value: the pair the put at Rev wrote to Key.
type Ref struct {
	Key string
	Rev int64
}

// Values reads the pairs an index points at from where they are kept:
// revd's reads the journal, which holds every put's pair in the record of
// its revision (or, once compaction folded that record, in the base
// snapshot).
type Values interface {
	// Pairs sets kvs[i] to the pair the put at refs[i].Rev wrote to
	// refs[i].Key, for every i (len(kvs) == len(refs)). Pairs are not
	// modified afterwards by anyone; they may be shared.
	Pairs(refs []Ref, kvs []*mvccpb.KeyValue) error
}

// Resolve returns the pairs ents name, read from v in one call.
func Resolve(v Values, ents []Entry) ([]*mvccpb.KeyValue, error) {
	if len(ents) == 0 {
		return nil, nil
	}
	refs := make([]Ref, len(ents))
	for i, e := range ents {
		refs[i] = e.Ref()
	}
	kvs := make([]*mvccpb.KeyValue, len(ents))
	if err := pairs(v, refs, kvs); err != nil {
		return nil, err
	}
	return kvs, nil
}

// pairs is v.Pairs with its error wrapped in ErrLoad.
func pairs(v Values, refs []Ref, kvs []*mvccpb.KeyValue) error {
	if v == nil {
		return fmt.Errorf("%w: no values to read %q at revision %d from", ErrLoad, refs[0].Key, refs[0].Rev)
	}
	if err := v.Pairs(refs, kvs); err != nil {
		if errors.Is(err, ErrLoad) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	return nil
}

// MemValues are Values kept in memory: every pair of the revisions applied
// to it. For tests and in-memory stores. Like a journal, they may be read
// while they are written, from any goroutine.
type MemValues struct {
	mu sync.RWMutex
	m  map[Ref]*mvccpb.KeyValue
}

// NewMemValues returns empty MemValues.
func NewMemValues() *MemValues { return &MemValues{m: map[Ref]*mvccpb.KeyValue{}} }

// Apply keeps the pairs the puts among events (of one revision) wrote.
func (m *MemValues) Apply(events []*mvccpb.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range events {
		if ev.Type == mvccpb.Event_PUT {
			m.m[Ref{Key: string(ev.Kv.Key), Rev: ev.Kv.ModRevision}] = ev.Kv
		}
	}
}

// Forget drops the pair ref names, as a journal whose record was folded
// away and overwritten no longer has it.
func (m *MemValues) Forget(ref Ref) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, ref)
}

// Pairs implements Values.
func (m *MemValues) Pairs(refs []Ref, kvs []*mvccpb.KeyValue) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i, r := range refs {
		kv, ok := m.m[r]
		if !ok {
			return fmt.Errorf("mvcc: no pair of %q at revision %d", r.Key, r.Rev)
		}
		kvs[i] = kv
	}
	return nil
}

// EncodedValues are Values that can also hand out pairs in protobuf's wire
// format, for an answer being encoded (revd's journal holds them encoded).
type EncodedValues interface {
	Values
	// EncodedPairs returns, for each ref, the pair it names, encoded as
	// proto.Marshal encodes it, as the length-delimited field number
	// field.
	EncodedPairs(field protowire.Number, refs []Ref) ([][]byte, error)
}

// EncodeResolved returns the pairs ents name, each as the length-delimited
// field number field of a message being encoded (a RangeResponse's kvs:
// 2): through EncodedPairs when v is EncodedValues, else read with Pairs
// and encoded. Errors wrap ErrLoad.
func EncodeResolved(field protowire.Number, v Values, ents []Entry) ([][]byte, error) {
	if len(ents) == 0 {
		return nil, nil
	}
	refs := make([]Ref, len(ents))
	for i, e := range ents {
		refs[i] = e.Ref()
	}
	if ev, ok := v.(EncodedValues); ok {
		out, err := ev.EncodedPairs(field, refs)
		if err != nil && !errors.Is(err, ErrLoad) {
			err = fmt.Errorf("%w: %w", ErrLoad, err)
		}
		return out, err
	}
	kvs := make([]*mvccpb.KeyValue, len(ents))
	if err := pairs(v, refs, kvs); err != nil {
		return nil, err
	}
	out := make([][]byte, len(kvs))
	for i, kv := range kvs {
		b, err := proto.Marshal(kv)
		if err != nil {
			return nil, err
		}
		out[i] = protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), b)
	}
	return out, nil
}
