// Command watch measures revd's watch fan-out against an in-process
// server.Server: the latency from a Put until each of N watchers has the
// event (p50, p99 over every watcher and put; and of the slowest watcher
// per put), and the heap held per idle watcher.
//
//	go run ./bench/watch                              # 10,000 watchers, gRPC, NATS commit feed
//	go run ./bench/watch -transport direct -feed local # the hub and streams alone
//
// Transports: "grpc" serves revd's gRPC gateway on a loopback port and
// watches through etcdserverpb Watch streams (client and server in this
// process, so the heap figure includes the client's side); "direct" opens
// server.NewWatchStream sessions with an in-memory sink (server side only).
// Feeds: "nats" carries commits to the watch hub over an embedded NATS
// server, as the revd command does; "local" is the in-process feed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/actors/watch"
	"revd/bus"
	"revd/gateway/grpcapi"
	"revd/server"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.watchers, "watchers", 10000, "number of watchers, all on the key that is put")
	flag.IntVar(&cfg.streams, "streams", 100, "watch streams (sessions) the watchers are spread over")
	flag.IntVar(&cfg.conns, "conns", 10, "gRPC connections the streams are spread over (grpc transport)")
	flag.IntVar(&cfg.puts, "puts", 200, "measured puts (each waits for the whole fan-out)")
	flag.IntVar(&cfg.warmup, "warmup", 20, "puts before measuring")
	flag.StringVar(&cfg.transport, "transport", "grpc", "grpc or direct")
	flag.StringVar(&cfg.feed, "feed", "nats", "commit feed: nats (as revd runs) or local")
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a temporary one, removed at the end)")
	flag.Parse()
	r, err := run(cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(r)
}

type config struct {
	watchers, streams, conns, puts, warmup int
	transport, feed, dir                   string
}

// result is what run measured.
type result struct {
	cfg              config
	all, slowest     []time.Duration // per (watcher, put); per put
	put              []time.Duration // Put call to its answer
	heapPerWatcher   float64         // bytes
	watcherSetupTime time.Duration
}

func (r *result) String() string {
	slices.Sort(r.all)
	slices.Sort(r.slowest)
	slices.Sort(r.put)
	return fmt.Sprintf(`revd watch fan-out (%s transport, %s feed, GOMAXPROCS %d)
  watchers %d on %d streams, %d measured puts (%d warm-up), latencies from the start of the Put call
  latency put -> watcher:      p50 %v  p99 %v  max %v   (%d samples)
  latency put -> last watcher: p50 %v  p99 %v  max %v
  put answered (for scale):    p50 %v  p99 %v
  heap per idle watcher:       %.0f bytes (%s)
  creating the watchers took %v
`, r.cfg.transport, r.cfg.feed, runtime.GOMAXPROCS(0),
		r.cfg.watchers, r.cfg.streams, r.cfg.puts, r.cfg.warmup,
		pct(r.all, 50), pct(r.all, 99), pct(r.all, 100), len(r.all),
		pct(r.slowest, 50), pct(r.slowest, 99), pct(r.slowest, 100),
		pct(r.put, 50), pct(r.put, 99),
		r.heapPerWatcher, heapNote(r.cfg.transport), r.watcherSetupTime.Round(time.Millisecond))
}

func heapNote(transport string) string {
	if transport == "direct" {
		return "server side: watcher, index, stream"
	}
	return "server and gRPC client sides together"
}

// pct is the p-th percentile of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))].Round(time.Microsecond)
}

// fanout tracks one put's delivery to every watcher.
type fanout struct {
	start    atomic.Int64 // unix nanoseconds of the put
	received atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration
	done     chan struct{}
	want     int64
}

// deliver records one watcher's receipt of the put's event.
func (f *fanout) deliver(at time.Time) {
	d := at.Sub(time.Unix(0, f.start.Load()))
	f.mu.Lock()
	f.lat = append(f.lat, d)
	f.mu.Unlock()
	if f.received.Add(1) == f.want {
		close(f.done)
	}
}

// sink is a direct-transport stream's receiver; ready is closed once it
// has the created responses of its want watchers.
type sink struct {
	want, created int
	ready         chan struct{}
	f             *atomic.Pointer[fanout]
}

// Send is called by the stream's sender goroutine only.
func (s *sink) Send(r *pb.WatchResponse) error {
	if r.Created {
		if s.created++; s.created == s.want {
			close(s.ready)
		}
		return nil
	}
	if len(r.Events) > 0 {
		s.f.Load().deliver(time.Now())
	}
	return nil
}

func run(cfg config) (*result, error) {
	if cfg.watchers <= 0 || cfg.streams <= 0 || cfg.streams > cfg.watchers {
		return nil, fmt.Errorf("need 0 < streams <= watchers")
	}
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "revd-bench-watch-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	opts := server.Options{DataDir: dir}
	if cfg.feed == "nats" {
		ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
		if err != nil {
			return nil, err
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		nc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		opts.Feed = bus.NewFeed(nc, "", nil)
	} else if cfg.feed != "local" {
		return nil, fmt.Errorf("unknown feed %q", cfg.feed)
	}
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	var cur atomic.Pointer[fanout]
	cur.Store(&fanout{done: make(chan struct{})})
	res := &result{cfg: cfg}
	key := []byte("bench/key")

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	setup := time.Now()
	var cleanup func()
	switch cfg.transport {
	case "direct":
		cleanup, err = directWatchers(srv, cfg, key, &cur)
	case "grpc":
		cleanup, err = grpcWatchers(srv, cfg, key, &cur)
	default:
		err = fmt.Errorf("unknown transport %q", cfg.transport)
	}
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res.watcherSetupTime = time.Since(setup)

	ctx := context.Background()
	for i := range cfg.warmup + cfg.puts {
		if i == cfg.warmup {
			// Every watcher has had an event: all are registered with the
			// hub, and idle again.
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			res.heapPerWatcher = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(cfg.watchers)
		}
		f := &fanout{done: make(chan struct{}), want: int64(cfg.watchers)}
		cur.Store(f)
		start := time.Now()
		f.start.Store(start.UnixNano())
		if _, err := srv.Put(ctx, &pb.PutRequest{Key: key, Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			return nil, err
		}
		putTook := time.Since(start)
		select {
		case <-f.done:
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("put %d: %d of %d watchers got the event within a minute", i, f.received.Load(), cfg.watchers)
		}
		if i >= cfg.warmup {
			f.mu.Lock()
			res.all = append(res.all, f.lat...)
			res.slowest = append(res.slowest, slices.Max(f.lat))
			res.put = append(res.put, putTook)
			f.mu.Unlock()
		}
	}
	return res, nil
}

// directWatchers opens the streams on the server itself, with in-memory
// sinks, and waits until every watcher is created.
func directWatchers(srv *server.Server, cfg config, key []byte, cur *atomic.Pointer[fanout]) (func(), error) {
	var streams []*watch.Stream
	var sinks []*sink
	for i := range cfg.streams {
		sk := &sink{want: perStream(cfg, i), ready: make(chan struct{}), f: cur}
		st := srv.NewWatchStream(context.Background(), sk)
		go st.Run() //nolint:errcheck // the sink never fails
		streams, sinks = append(streams, st), append(sinks, sk)
		for range sk.want {
			st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: key}}})
		}
	}
	cleanup := func() {
		for _, st := range streams {
			st.Close()
		}
	}
	timeout := time.After(time.Minute)
	for i, sk := range sinks {
		select {
		case <-sk.ready:
		case <-timeout:
			cleanup()
			return nil, fmt.Errorf("stream %d: its watchers were not all created within a minute", i)
		}
	}
	return cleanup, nil
}

// perStream is how many of the watchers stream i holds.
func perStream(cfg config, i int) int {
	n := cfg.watchers / cfg.streams
	if i < cfg.watchers%cfg.streams {
		n++
	}
	return n
}

// grpcWatchers serves the gRPC gateway on a loopback port and opens the
// streams through it.
func grpcWatchers(srv *server.Server, cfg config, key []byte, cur *atomic.Pointer[fanout]) (func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gs := grpcapi.New(srv, grpcapi.Options{})
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	ctx, cancel := context.WithCancel(context.Background())
	var conns []*grpc.ClientConn
	cleanup := func() {
		cancel()
		for _, c := range conns {
			c.Close()
		}
		gs.Stop()
	}
	nconns := max(1, min(cfg.conns, cfg.streams))
	for range nconns {
		c, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			cleanup()
			return nil, err
		}
		conns = append(conns, c)
	}
	created := make(chan error, cfg.streams)
	for i := range cfg.streams {
		ws, err := pb.NewWatchClient(conns[i%nconns]).Watch(ctx)
		if err != nil {
			cleanup()
			return nil, err
		}
		n := perStream(cfg, i)
		for range n {
			if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: key}}}); err != nil {
				cleanup()
				return nil, err
			}
		}
		go func() {
			seen := 0
			for {
				r, err := ws.Recv()
				if err != nil {
					if seen < n {
						created <- err
					}
					return
				}
				switch {
				case r.Created:
					if seen++; seen == n {
						created <- nil
					}
				case len(r.Events) > 0:
					cur.Load().deliver(time.Now())
				}
			}
		}()
	}
	for range cfg.streams {
		select {
		case err := <-created:
			if err != nil {
				cleanup()
				return nil, err
			}
		case <-time.After(time.Minute):
			cleanup()
			return nil, fmt.Errorf("watchers not created within a minute")
		}
	}
	return cleanup, nil
}
