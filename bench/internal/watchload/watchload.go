// Package watchload measures watchers over etcd's gRPC Watch API, for etcd
// and revd alike: the memory an idle watcher costs the server (OpenIdle)
// and the latency of one write fanned out to many watchers (FanOut).
//
// Watchers are spread evenly over Streams watch streams, and the streams
// over Conns gRPC connections. Raw gRPC is used (no clientv3), so every
// watcher is one WatchCreateRequest on the wire.
package watchload

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/bench/internal/stats"
)

// Layout says how watchers are spread over streams and connections.
type Layout struct {
	Watchers, Streams, Conns int
}

func (l Layout) norm() Layout {
	l.Streams = max(1, min(l.Streams, l.Watchers))
	l.Conns = max(1, min(l.Conns, l.Streams))
	return l
}

// Set is a set of open watch streams.
type Set struct {
	conns   []*grpc.ClientConn
	streams []pb.Watch_WatchClient
	cancel  context.CancelFunc
}

// Close cancels every stream and closes the connections.
func (s *Set) Close() {
	s.cancel()
	for _, c := range s.conns {
		c.Close()
	}
}

// open dials the connections, opens the streams and creates watcher w of
// stream i on key(w), waiting for every created response.
func open(ctx context.Context, endpoint string, l Layout, key func(w int) []byte) (*Set, error) {
	l = l.norm()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Set{cancel: cancel}
	fail := func(err error) (*Set, error) { s.Close(); return nil, err }
	for range l.Conns {
		c, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
		if err != nil {
			return fail(err)
		}
		s.conns = append(s.conns, c)
	}
	for i := range l.Streams {
		st, err := pb.NewWatchClient(s.conns[i%l.Conns]).Watch(sctx)
		if err != nil {
			return fail(fmt.Errorf("watchload: open stream: %w", err))
		}
		s.streams = append(s.streams, st)
	}
	errc := make(chan error, l.Streams)
	for i, st := range s.streams {
		go func() {
			n := 0
			for w := i; w < l.Watchers; w += l.Streams {
				req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
					CreateRequest: &pb.WatchCreateRequest{Key: key(w)}}}
				if err := st.Send(req); err != nil {
					errc <- fmt.Errorf("watchload: create watcher: %w", err)
					return
				}
				n++
			}
			for n > 0 {
				resp, err := st.Recv()
				if err != nil {
					errc <- fmt.Errorf("watchload: waiting for created: %w", err)
					return
				}
				if resp.Canceled {
					errc <- fmt.Errorf("watchload: watcher refused: %s", resp.CancelReason)
					return
				}
				if resp.Created {
					n--
				}
			}
			errc <- nil
		}()
	}
	for range s.streams {
		select {
		case err := <-errc:
			if err != nil {
				return fail(err)
			}
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	return s, nil
}

// OpenIdle creates l.Watchers watchers, each on a key of its own under
// prefix that nobody writes, and returns once all are created.
func OpenIdle(ctx context.Context, endpoint, prefix string, l Layout) (*Set, error) {
	return open(ctx, endpoint, l, func(w int) []byte { return fmt.Appendf(nil, "%s%07d", prefix, w) })
}

// FanOutConfig describes a fan-out run.
type FanOutConfig struct {
	Endpoint string
	Layout
	// Key is the key every watcher watches and every put writes.
	Key string
	// Puts writes of ValSize bytes are made at PutRate per second.
	Puts, ValSize int
	PutRate       float64
	// Done, if set, counts events as they arrive.
	Done *atomic.Int64
}

// FanOutResult is the outcome of FanOut.
type FanOutResult struct {
	// Events is the latency of each event, from the moment its put was
	// acknowledged to the moment a watcher received it (0 if it arrived
	// before the acknowledgement), as etcd's watch-latency benchmark
	// measures it.
	Events *stats.Summary
	// FromPutStart is the same from the moment the put was sent.
	FromPutStart *stats.Summary
	// Puts summarizes the puts.
	Puts *stats.Summary
	// Missing is the number of events that never arrived.
	Missing int
}

// FanOut creates cfg.Watchers watchers on cfg.Key, then makes cfg.Puts puts
// to it at cfg.PutRate and measures when each watcher receives each event.
// It waits for the last event at most 30 s after the last put.
func FanOut(ctx context.Context, cfg FanOutConfig) (*FanOutResult, error) {
	s, err := open(ctx, cfg.Endpoint, cfg.Layout, func(int) []byte { return []byte(cfg.Key) })
	if err != nil {
		return nil, err
	}
	defer s.Close()

	base := time.Now()
	// Each stream records (revision, arrival) of every event it receives.
	type arrival struct {
		rev int64
		at  time.Duration
	}
	l := cfg.Layout.norm()
	want := int64(cfg.Puts) * int64(l.Watchers)
	var got atomic.Int64
	allIn := make(chan struct{})
	arrivals := make([][]arrival, len(s.streams))
	var wg sync.WaitGroup
	for i, st := range s.streams {
		wg.Go(func() {
			for {
				resp, err := st.Recv()
				if err != nil {
					return // canceled by Close, or the stream failed: events go missing
				}
				now := time.Since(base)
				for _, ev := range resp.Events {
					arrivals[i] = append(arrivals[i], arrival{ev.Kv.ModRevision, now})
				}
				if n := int64(len(resp.Events)); n > 0 {
					if cfg.Done != nil {
						cfg.Done.Add(n)
					}
					if got.Add(n) == want {
						close(allIn)
					}
				}
			}
		})
	}

	conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	value := make([]byte, cfg.ValSize)
	rand.Read(value)
	type put struct{ start, ack time.Duration }
	puts := map[int64]put{}
	var putLats []time.Duration
	var putErrs []string
	interval := time.Duration(float64(time.Second) / math.Max(cfg.PutRate, 1e-3))
	putsBegan := time.Now()
	for i := range cfg.Puts {
		if d := time.Until(putsBegan.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		st := time.Since(base)
		resp, err := kv.Put(ctx, &pb.PutRequest{Key: []byte(cfg.Key), Value: value})
		ack := time.Since(base)
		if err != nil {
			putErrs = append(putErrs, err.Error())
			continue
		}
		putLats = append(putLats, ack-st)
		puts[resp.Header.Revision] = put{st, ack}
	}
	putsTook := time.Since(putsBegan)
	if len(puts) > 0 {
		select {
		case <-allIn:
		case <-time.After(30 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.Close()
	wg.Wait()

	var fromAck, fromStart []time.Duration
	var firstAt, lastAt time.Duration = math.MaxInt64, 0
	for _, as := range arrivals {
		for _, a := range as {
			p, ok := puts[a.rev]
			if !ok {
				continue // not one of ours
			}
			fromAck = append(fromAck, max(0, a.at-p.ack))
			fromStart = append(fromStart, a.at-p.start)
			firstAt, lastAt = min(firstAt, a.at), max(lastAt, a.at)
		}
	}
	if len(fromAck) == 0 {
		return nil, errors.New("watchload: no event arrived")
	}
	span := lastAt - firstAt
	res := &FanOutResult{
		Events:       stats.Summarize(fromAck, nil, span),
		FromPutStart: stats.Summarize(fromStart, nil, span),
		Puts:         stats.Summarize(putLats, putErrs, putsTook),
		Missing:      int(int64(len(puts))*int64(l.Watchers) - int64(len(fromAck))),
	}
	return res, nil
}
