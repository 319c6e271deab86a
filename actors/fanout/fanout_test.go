package fanout

import (
	"slices"
	"testing"

	"revd/actors/sequencer"
	"revd/journal"
)

// TestPublishInOrder: every subscriber gets every batch, in the order they
// subscribed, batch after batch.
func TestPublishInOrder(t *testing.T) {
	var f Fanout
	var got []string
	for _, name := range []string{"revisions", "feed", "shards"} {
		f.Subscribe(func(b *sequencer.Batch) {
			got = append(got, name+"@"+string(rune('0'+b.Records[0].Revision)))
		})
	}
	f.Publish(&sequencer.Batch{Records: []journal.Record{{Revision: 2}}})
	f.Publish(&sequencer.Batch{Records: []journal.Record{{Revision: 3}}})
	want := []string{"revisions@2", "feed@2", "shards@2", "revisions@3", "feed@3", "shards@3"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
