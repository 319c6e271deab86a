// Package watchorder takes apart the figure of etcd's benchmark tool's
// watch-latency workload. The tool reports one distribution: for every
// watcher and every put, the time from the moment the put's answer reached
// the client to the moment the watcher got the put's event (0 if the event
// came first). Run replays the tool's layout with etcd's own Go client, as
// the tool does (the watch streams on one connection, the puts from
// another, paced by a token bucket that starts full), and keeps each put's
// answer and each of its events; Analyze then tells the two things that
// make that distribution apart:
//
//   - the server's order: how long after a put's answer its first event
//     reaches the client (negative when the event comes first);
//   - the client's pace: how far apart a put's events reach the watchers,
//     which is the client's own work of taking in a response per watcher.
//
// It also splits the p99 between the opening burst (the puts sent back to
// back while the bucket still had tokens) and the rest, and counts the puts
// whose events make the tail.
package watchorder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Config is one replay. Endpoint and Puts are required; the rest default to
// the layout the harness gives the tool.
type Config struct {
	Endpoint string
	// Streams and WatchersPerStream lay out the watchers: Streams watch
	// streams on one connection, each with WatchersPerStream watchers of
	// the key. Defaults 10 and 10.
	Streams, WatchersPerStream int
	// Puts is the number of puts; Rate their pace per second (default
	// 100): the token bucket holds Rate tokens and starts full, as the
	// tool's does.
	Puts, Rate int
	// KeySize and ValSize are the put's key and value sizes (defaults 8
	// and 256).
	KeySize, ValSize int
}

func (c *Config) norm() {
	if c.Streams <= 0 {
		c.Streams = 10
	}
	if c.WatchersPerStream <= 0 {
		c.WatchersPerStream = 10
	}
	if c.Rate <= 0 {
		c.Rate = 100
	}
	if c.KeySize <= 0 {
		c.KeySize = 8
	}
	if c.ValSize <= 0 {
		c.ValSize = 256
	}
}

// Put is what the client saw of one put.
type Put struct {
	// Paced reports whether the put waited for the token bucket: false for
	// the opening burst, and for any later put that found a token because
	// the one before it took longer than 1/Rate.
	Paced bool
	// Answered is when the put's answer reached the client.
	Answered time.Time
	// Events holds, per watcher, when the watcher got the put's event.
	Events []time.Time
}

// ErrMissingEvents is returned when a watcher did not get exactly one event
// per put.
var ErrMissingEvents = errors.New("watchorder: a watcher did not get one event per put")

// Run replays the workload against cfg.Endpoint and returns every put. It
// waits as long as ctx allows: give it a deadline.
func Run(ctx context.Context, cfg Config) ([]Put, error) {
	cfg.norm()
	if cfg.Puts <= 0 {
		return nil, errors.New("watchorder: no puts")
	}
	dial := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{cfg.Endpoint}, DialTimeout: 5 * time.Second,
			Logger: zap.NewNop(), Context: ctx})
	}
	wc, err := dial()
	if err != nil {
		return nil, fmt.Errorf("watchorder: %w", err)
	}
	defer wc.Close()
	pc, err := dial()
	if err != nil {
		return nil, fmt.Errorf("watchorder: %w", err)
	}
	defer pc.Close()

	key := strings.Repeat("w", cfg.KeySize)
	val := strings.Repeat("v", cfg.ValSize)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var chans []clientv3.WatchChan
	for range cfg.Streams {
		w := clientv3.NewWatcher(wc)
		defer w.Close()
		for range cfg.WatchersPerStream {
			ch := w.Watch(wctx, key, clientv3.WithCreatedNotify())
			// Every watcher is registered before the first put.
			if resp, ok := <-ch; !ok || !resp.Created {
				return nil, fmt.Errorf("watchorder: watch not created: %v", resp.Err())
			}
			chans = append(chans, ch)
		}
	}

	// Each watcher keeps the revision and arrival of every event it gets;
	// events are matched to puts by revision once all are in.
	type arrival struct {
		rev int64
		at  time.Time
	}
	got := make([][]arrival, len(chans))
	lost := make([]error, len(chans))
	var wg sync.WaitGroup
	for w, ch := range chans {
		wg.Go(func() {
			for len(got[w]) < cfg.Puts {
				resp, ok := <-ch
				if !ok {
					lost[w] = fmt.Errorf("watch closed after %d events", len(got[w]))
					return
				}
				if err := resp.Err(); err != nil {
					lost[w] = err
					return
				}
				now := time.Now()
				for _, ev := range resp.Events {
					got[w] = append(got[w], arrival{ev.Kv.ModRevision, now})
				}
			}
		})
	}

	puts := make([]Put, cfg.Puts)
	revs := make(map[int64]int, cfg.Puts)
	lim := rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Rate)
	var putErr error
	for i := range puts {
		r := lim.Reserve()
		if d := r.Delay(); d > 0 {
			puts[i].Paced = true
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				putErr = ctx.Err()
			}
		}
		if putErr != nil {
			break
		}
		resp, err := pc.Put(ctx, key, val)
		if err != nil {
			putErr = err
			break
		}
		puts[i].Answered = time.Now()
		revs[resp.Header.Revision] = i
	}
	if putErr != nil {
		cancel()
		wg.Wait()
		return nil, fmt.Errorf("watchorder: put: %w", putErr)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		cancel()
		<-done
		return nil, fmt.Errorf("watchorder: waiting for events: %w", ctx.Err())
	}
	for i := range puts {
		puts[i].Events = make([]time.Time, len(chans))
	}
	for w, as := range got {
		if lost[w] != nil {
			return nil, fmt.Errorf("%w: watcher %d: %v", ErrMissingEvents, w, lost[w])
		}
		for _, a := range as {
			i, ok := revs[a.rev]
			if !ok || !puts[i].Events[w].IsZero() {
				return nil, fmt.Errorf("%w: watcher %d got revision %d, not one of the puts' or twice", ErrMissingEvents, w, a.rev)
			}
			puts[i].Events[w] = a.at
		}
	}
	return puts, nil
}
