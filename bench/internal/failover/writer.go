package failover

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/status"
)

// Options configure a Writer; the zero value works.
type Options struct {
	// Interval is the time between the starts of two writes (default
	// 5 ms): the measurement's resolution.
	Interval time.Duration
	// Timeout bounds each write (default 10 s, longer than etcd's request
	// timeout of about 7 s with its default election timeout).
	Timeout time.Duration
	// KeyPrefix is the written keys' prefix (default "failover/"); Keys is
	// how many distinct keys the writes cycle through (default 1000).
	KeyPrefix string
	Keys      int
	// ValSize is each value's size in bytes (default 0: empty values).
	ValSize int
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "failover/"
	}
	if o.Keys <= 0 {
		o.Keys = 1000
	}
	return o
}

// Writer begins a put every Options.Interval through its members' KV
// clients in turn, each put on its own (see the package doc), and keeps
// every write's record.
type Writer struct {
	kvs    []pb.KVClient
	opts   Options
	value  []byte
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	writes  []Write
	waiters []waiter
}

// waiter is a caller of AckedAfter: ch is closed at the first
// acknowledgement of a write begun at or after since.
type waiter struct {
	since time.Time
	ch    chan struct{}
}

// Start starts writing through kvs (one client per member) until Stop or
// until ctx ends.
func Start(ctx context.Context, kvs []pb.KVClient, opts Options) *Writer {
	opts = opts.withDefaults()
	w := &Writer{kvs: kvs, opts: opts, value: make([]byte, opts.ValSize)}
	rand.Read(w.value)
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.wg.Add(1)
	go w.loop()
	return w
}

func (w *Writer) loop() {
	defer w.wg.Done()
	began := time.Now()
	for i := 0; ; i++ {
		if d := time.Until(began.Add(time.Duration(i) * w.opts.Interval)); d > 0 {
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(d):
			}
		} else if w.ctx.Err() != nil {
			return
		}
		member := i % len(w.kvs)
		key := fmt.Appendf(nil, "%s%06d", w.opts.KeyPrefix, i%w.opts.Keys)
		w.wg.Add(1)
		go w.write(member, key)
	}
}

func (w *Writer) write(member int, key []byte) {
	defer w.wg.Done()
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.Timeout)
	defer cancel()
	rec := Write{Start: time.Now(), Member: member}
	_, err := w.kvs[member].Put(ctx, &pb.PutRequest{Key: key, Value: w.value})
	rec.End = time.Now()
	if err != nil {
		rec.Err = message(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, rec)
	if !rec.OK() {
		return
	}
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if rec.Start.Before(wt.since) {
			kept = append(kept, wt)
			continue
		}
		close(wt.ch)
	}
	clear(w.waiters[len(kept):])
	w.waiters = kept
}

// AckedAfter returns a channel that is closed once a write begun at or
// after since has been acknowledged (at once if one already was).
func (w *Writer) AckedAfter(since time.Time) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rec := range w.writes {
		if rec.OK() && !rec.Start.Before(since) {
			close(ch)
			return ch
		}
	}
	w.waiters = append(w.waiters, waiter{since, ch})
	return ch
}

// Stop stops writing, cancels the writes still waiting for an answer
// (they are recorded as failed), and returns every write's record in the
// order they ended.
func (w *Writer) Stop() []Write {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

// addr matches a host:port in an error message, which would otherwise
// make every member's "connection refused" a message of its own.
var addr = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)

// message is a write error as the report groups it: the gRPC status's
// message with its code, addresses left out.
func message(err error) string {
	st := status.Convert(err)
	return st.Code().String() + ": " + addr.ReplaceAllString(st.Message(), "ADDR")
}
