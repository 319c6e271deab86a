package server

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRestartReadsNoValue: start-up rebuilds the index from the journal's
// index entries without reading a value, and a value found damaged when a
// read asks for it is refused, never served; the others are served.
func TestRestartReadsNoValue(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	mustPut(t, s, "a", "1")
	damaged := mustPut(t, s, "b", "1").Header.Revision
	mustPut(t, s, "c", "1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the value in b's record (the journal's layout:
	// "r" and the revision, 8 bytes big-endian).
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64([]byte{'r'}, uint64(damaged))
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	v = append([]byte(nil), v...)
	closer.Close()
	v[len(v)-1] ^= 0x20
	if err := db.Set(key, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	defer s.Close()
	for _, k := range []string{"a", "c"} {
		resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte(k)})
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
			t.Fatalf("read of %s: %v %v", k, resp, err)
		}
	}
	if resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("b")}); err == nil {
		t.Fatalf("the damaged value was served: %v", resp)
	}
	// What the index knows needs no value.
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("d"), KeysOnly: true})
	if err != nil || resp.Count != 3 || len(resp.Kvs) != 3 || resp.Kvs[1].ModRevision != damaged {
		t.Fatalf("keys only: %v %v", resp, err)
	}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
