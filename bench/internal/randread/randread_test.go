package randread

import (
	"encoding/binary"
	"testing"
)

// TestKeyAsTheTool: Key gives the keys etcd's benchmark tool writes with
// --sequential-keys: one reused buffer, a varint put into it per key.
func TestKeyAsTheTool(t *testing.T) {
	const size = 8
	k := make([]byte, size)
	for n := range 300000 {
		binary.PutVarint(k, int64(n))
		if got := Key(n, size); string(got) != string(k) {
			t.Fatalf("key %d = %x, the tool writes %x", n, got, k)
		}
	}
}
