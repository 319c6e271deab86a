package journal

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestFieldArena: every field is b encoded as the field asked for, its
// capacity ends with it, and the buffers behind the fields hold no more
// than a third again the bytes handed out (plus the last buffer's room):
// a field of arenaAlone or more has a buffer of its own, of its size
// class.
func TestFieldArena(t *testing.T) {
	var a fieldArena
	sizes := []int{10, 3000, 100 << 10, 300 << 10, 600 << 10, 5, 200 << 10, 700 << 10, 40 << 10}
	for range 4 {
		sizes = append(sizes, sizes...)
	}
	bufs := map[unsafe.Pointer]int{} // each buffer's start, by its capacity
	handed := 0
	for i, n := range sizes {
		b := bytes.Repeat([]byte{byte(i)}, n)
		f := a.add(2, b)
		want := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b)
		if !bytes.Equal(f, want) {
			t.Fatalf("field %d (%d bytes): %d bytes, want %d", i, n, len(f), len(want))
		}
		handed += len(f)
		if len(f) >= arenaAlone {
			// A buffer of its own, from the pool: its size class.
			if cap(f) != classSize(len(f)) {
				t.Fatalf("field %d (%d bytes): capacity %d, want %d", i, len(f), cap(f), classSize(len(f)))
			}
			bufs[unsafe.Pointer(unsafe.SliceData(f))] = cap(f)
			continue
		}
		if cap(f) != len(f) {
			t.Fatalf("field %d (%d bytes): capacity %d, want it to end with the field", i, len(f), cap(f))
		}
		// A field from a shared buffer: the buffer is the arena's
		// current one.
		whole := a.buf[:cap(a.buf)]
		bufs[unsafe.Pointer(unsafe.SliceData(whole))] = cap(whole)
	}
	total := 0
	for _, c := range bufs {
		total += c
	}
	if limit := handed + handed/3 + arenaMax; total > limit {
		t.Errorf("buffers of %d bytes for %d handed out, want at most %d", total, handed, limit)
	}
}
