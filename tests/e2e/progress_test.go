package e2e

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestProgressNotifyTiming opens a watch stream with a progress_notify
// watcher on each server, both started with
// --watch-progress-notify-interval=2s, and times the progress responses:
// as etcd's, each stream's come one interval (plus up to a tenth of it)
// after the stream opened, and every interval after that, not at a moment
// shared by the whole server.
func TestProgressNotifyTiming(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	const interval = 2 * time.Second
	opts := testutil.Options{ExtraArgs: []string{"--watch-progress-notify-interval=" + interval.String()}}
	for _, p := range []*testutil.Proc{testutil.StartEtcd(t, opts), testutil.Start(t, kind, opts)} {
		// Open the stream at a random moment of the server's life.
		time.Sleep(700 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		ws, err := p.Dial(t).Watch.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("k"), ProgressNotify: true}}}); err != nil {
			t.Fatal(err)
		}
		var at []time.Duration
		for len(at) < 2 {
			r, err := ws.Recv()
			if err != nil {
				t.Fatalf("%s: %v", p.Kind, err)
			}
			if !r.Created && len(r.Events) == 0 && !r.Canceled {
				at = append(at, time.Since(start))
			}
		}
		cancel()
		first, second := at[0], at[1]-at[0]
		if first < interval || first > interval+interval/10+500*time.Millisecond ||
			second < interval-200*time.Millisecond || second > interval+interval/10+500*time.Millisecond {
			t.Errorf("%s: progress responses %v and %v after the stream opened, want one interval (%v, plus up to a tenth) apart from its start",
				p.Kind, at[0], at[1], interval)
		}
	}
}
