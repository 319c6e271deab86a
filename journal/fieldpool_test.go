package journal

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestClassSize: a size class is the size rounded up to a quarter of its
// power of two, less than a quarter more than the size; each class has a
// pool of its own.
func TestClassSize(t *testing.T) {
	cases := map[int]int{
		256 << 10: 256 << 10, 256<<10 + 1: 320 << 10, 320 << 10: 320 << 10,
		500 << 10: 512 << 10, 512<<10 + 1: 640 << 10, 1 << 20: 1 << 20,
		1<<20 + 5: 1280 << 10, 3 << 20: 3 << 20, 7<<20 + 1: 8 << 20,
	}
	for n, want := range cases {
		if got := classSize(n); got != want {
			t.Errorf("classSize(%d) = %d, want %d", n, got, want)
		}
	}
	seen := map[int]int{}
	for n := PooledFieldBytes; n <= 64<<20; n += 4093 {
		c := classSize(n)
		if c < n || 4*(c-n) >= n || classSize(c) != c {
			t.Fatalf("classSize(%d) = %d", n, c)
		}
		i := classIndex(c)
		if other, ok := seen[i]; ok && other != c {
			t.Fatalf("classes %d and %d share pool %d", other, c, i)
		}
		seen[i] = c
	}
}

// TestReleasedFieldsAreReused: fields of large values given back and lent
// again hold what each new read put in them, never an earlier read's
// bytes; small fields and foreign buffers are not taken.
func TestReleasedFieldsAreReused(t *testing.T) {
	for round := range 20 {
		var fields [][]byte
		var wants [][]byte
		for i := range 4 {
			v := bytes.Repeat([]byte{byte(round*4 + i)}, PooledFieldBytes+i*100_000+round)
			f := newField(2, v)
			fields = append(fields, f)
			wants = append(wants, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), v))
		}
		for i, f := range fields {
			if !bytes.Equal(f, wants[i]) {
				t.Fatalf("round %d: field %d does not hold its value", round, i)
			}
			if c := cap(f); c != classSize(len(f)) {
				t.Fatalf("round %d: field %d of %d bytes has capacity %d, want its class's %d", round, i, len(f), c, classSize(len(f)))
			}
			ReleaseField(f)
		}
	}
	// A small field and a buffer whose size is no class are left alone.
	ReleaseField(newField(2, []byte("small")))
	ReleaseField(make([]byte, PooledFieldBytes+1))
	if b := pooledBuffer(PooledFieldBytes + 1); cap(b) != classSize(PooledFieldBytes+1) {
		t.Fatalf("lent a buffer of %d bytes, want %d", cap(b), classSize(PooledFieldBytes+1))
	}
}

// BenchmarkLargeField: encoding a 1 MiB value's field and giving it back,
// as a range of it through gRPC does; with the pool, the bytes allocated
// per field are a small fraction of the value.
func BenchmarkLargeField(b *testing.B) {
	v := make([]byte, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		ReleaseField(newField(2, v))
	}
}
