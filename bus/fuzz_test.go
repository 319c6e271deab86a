package bus_test

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/watch"
	"revd/bus"
	"revd/journal"
)

// FuzzDecodeCommit: the commit feed's decoder takes any bytes without
// panicking, and what it decodes encodes and decodes to the same commit.
func FuzzDecodeCommit(f *testing.F) {
	c := &watch.Commit{CompactRev: 3, Records: []journal.Record{{Revision: 5, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 5, ModRevision: 5, Version: 1},
			PrevKv: &mvccpb.KeyValue{Key: []byte("k")}},
		{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("d"), ModRevision: 5}},
	}}}}
	valid, err := bus.EncodeCommit(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{0x12, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := bus.DecodeCommit(data)
		if err != nil {
			return
		}
		again, err := bus.EncodeCommit(c)
		if err != nil {
			t.Fatalf("a decoded commit does not encode: %v", err)
		}
		c2, err := bus.DecodeCommit(again)
		if err != nil {
			t.Fatalf("a re-encoded commit does not decode: %v", err)
		}
		if c.CompactRev != c2.CompactRev || len(c.Records) != len(c2.Records) {
			t.Fatalf("round trip changed the commit: %+v, %+v", c, c2)
		}
		for i := range c.Records {
			if c.Records[i].Revision != c2.Records[i].Revision || len(c.Records[i].Events) != len(c2.Records[i].Events) {
				t.Fatalf("round trip changed revision %d", i)
			}
			for j := range c.Records[i].Events {
				if !proto.Equal(c.Records[i].Events[j], c2.Records[i].Events[j]) {
					t.Fatalf("round trip changed event %d of revision %d", j, i)
				}
			}
		}
	})
}
