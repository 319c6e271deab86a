package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/tests/testutil"
)

// TestRevdStopsDecidingWhenRaftStops: 100 clients write at once while
// raft's log fails (its snapshot directory moved away: the next raft
// snapshot, every 50 requests here, cannot be written, and raft stops).
// Every write then gets an error without waiting out its deadline, the
// later ones etcd's "corrupt cluster", and while the clients keep writing
// revd holds no more memory for them. It had decided the writes waiting
// for it again and again, each into the sequencer's overlay, which only
// applied batches trim: a member grew by gigabytes a minute. (Whether a
// write is caught waiting when raft stops depends on timing: this test
// failed in one run of three before the fix; server's
// TestWritesRefusedOnceRaftStops makes that case every time.)
func TestRevdStopsDecidingWhenRaftStops(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--snapshot-count=50"}})
	c := p.Dial(t)
	var (
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		refusals = map[string]int{}
		acked    int
	)
	for w := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				_, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("w%02d-%03d", w, i%100)), Value: make([]byte, 256)})
				cancel()
				mu.Lock()
				if err == nil {
					acked++
				} else {
					refusals[errorText(err)]++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 30*time.Second, "writes acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked > 500
	})
	// Moved away at once (removing it could race raft writing into it).
	if err := os.Rename(filepath.Join(p.DataDir, "snap"), filepath.Join(t.TempDir(), "snap")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "raft's log failing", func() bool {
		return strings.Contains(p.Tail(256<<10), "refusing all writes")
	})
	time.Sleep(time.Second)
	before := testutil.StatusKiB(t, p.Pid(), "RssAnon")
	time.Sleep(3 * time.Second)
	after := testutil.StatusKiB(t, p.Pid(), "RssAnon")
	close(stop)
	wg.Wait()
	t.Logf("%d puts acknowledged; refusals: %v; RssAnon %d MiB, then %d MiB 3 s later", acked, refusals, before>>10, after>>10)
	if n := refusals[errorText(status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error()))]; n > 0 {
		t.Errorf("%d puts waited out their 15 s deadline instead of being refused", n)
	}
	if refusals[rpctypes.ErrorDesc(rpctypes.ErrGRPCCorrupt)] == 0 {
		t.Errorf("no put refused with %q after raft's log failed", rpctypes.ErrorDesc(rpctypes.ErrGRPCCorrupt))
	}
	if grown := (after - before) >> 10; grown > 64 {
		t.Errorf("revd's anonymous memory grew by %d MiB in 3 s of refused writes", grown)
	}
}

// errorText is what a client sees of a call's error: its gRPC message.
func errorText(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded.Error()
	}
	return err.Error()
}
