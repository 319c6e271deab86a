package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"revd/tests/testutil"
)

// TestAutoCompaction: with --auto-compaction-retention=1s (periodic, as
// etcd reads it), revd compacts by itself: a second or so later, reading
// the first revisions answers etcd's "required revision has been
// compacted", and the current state is whole.
func TestAutoCompaction(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's flag run against revd; etcd's own compactor is etcd's business")
	}
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--auto-compaction-retention=1s"}})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: 2})
		if err != nil {
			if status.Convert(err).Message() != status.Convert(rpctypes.ErrGRPCCompacted).Message() {
				t.Fatalf("reading revision 2: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("revision 2 still readable 15s after the writes: no automatic compaction")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "j" || r.Kvs[0].Version != 10 {
		t.Fatalf("current state after compaction: %v, %v", r, err)
	}
}

// TestAutoCompactionFlags: bad values stop revd with a message, as other
// bad flags do.
func TestAutoCompactionFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--auto-compaction-mode=daily", "--auto-compaction-retention=1"},
		{"--auto-compaction-retention=soon"},
		{"--auto-compaction-retention=-1"},
		{"--auto-compaction-mode=revision", "--auto-compaction-retention=1h"},
	} {
		code, out := runRevd(t, args...)
		if code != 2 || !strings.Contains(out, "--auto-compaction") {
			t.Errorf("revd %v: exit %d, stderr %q", args, code, out)
		}
	}
}
