package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestLargeValueRanges: ranges of large values, whose pairs go out in
// pooled buffers given back once written, answer every client with its
// own values, however many read at once: a buffer given back too early,
// and lent to another read, would show in some answer.
func TestLargeValueRanges(t *testing.T) {
	addr, srv := serveGuarded(t, Options{})
	ctx := context.Background()
	const keys = 6
	values := make([][]byte, keys)
	for i := range values {
		// Sizes of one pool size class, so that a buffer given back too
		// early would be lent to a read of another key.
		values[i] = bytes.Repeat([]byte{byte('a' + i)}, 300<<10+i*1000)
		if _, err := srv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "big/%d", i), Value: values[i]}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 40 {
				i := (c + n) % keys
				var req *pb.RangeRequest
				if n%4 == 3 {
					req = &pb.RangeRequest{Key: []byte("big/"), RangeEnd: []byte("big0")}
				} else {
					req = &pb.RangeRequest{Key: fmt.Appendf(nil, "big/%d", i)}
				}
				resp, err := kv.Range(ctx, req)
				if err != nil {
					errs <- err
					return
				}
				for _, p := range resp.Kvs {
					var j int
					if _, err := fmt.Sscanf(string(p.Key), "big/%d", &j); err != nil || !bytes.Equal(p.Value, values[j]) {
						errs <- fmt.Errorf("client %d, read %d: %s has %d bytes not its own (%d)", c, n, p.Key, len(p.Value), len(values[j]))
						return
					}
				}
				if want := map[bool]int{true: keys, false: 1}[n%4 == 3]; len(resp.Kvs) != want {
					errs <- fmt.Errorf("client %d, read %d: %d pairs, want %d", c, n, len(resp.Kvs), want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
