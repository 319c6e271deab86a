// Package natsload drives revd's NATS API (revd.kv.put, revd.kv.range) the
// way etcd's benchmark tool drives the gRPC API: Clients goroutines share
// Conns NATS connections (client i uses connection i mod Conns), take
// requests from one queue, and every request's latency is recorded. The
// keys and values are built as the tool builds them, so a NATS run and a
// gRPC run of the same Config do the same work.
package natsload

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bench/internal/stats"
	"revd/client/natsclient"
)

// Op is the request a run sends.
type Op int

const (
	// Put sends PutRequests with the tool's put keys and values.
	Put Op = iota
	// Range sends RangeRequests for RangeKey.
	Range
)

// Config describes a run.
type Config struct {
	// URL is revd's NATS server, nats://host:port.
	URL string
	// Clients and Conns as in etcd's benchmark tool (defaults 1).
	Clients, Conns int
	// Total is the number of requests.
	Total int
	Op    Op
	// KeySize, ValSize, KeySpace and SeqKeys as the tool's put flags
	// --key-size, --val-size, --key-space-size and --sequential-keys.
	KeySize, ValSize, KeySpace int
	SeqKeys                    bool
	// RangeKey is the key Range reads; Serializable makes it serializable.
	RangeKey     string
	Serializable bool
	// Done, if set, counts finished requests as they finish.
	Done *atomic.Int64
}

// Run runs cfg against revd and summarizes it. It fails only if it cannot
// connect; failed requests are counted in the summary's Errors.
func Run(ctx context.Context, cfg Config) (*stats.Summary, error) {
	cfg.Clients, cfg.Conns, cfg.KeySpace = max(cfg.Clients, 1), max(cfg.Conns, 1), max(cfg.KeySpace, 1)
	conns := make([]*natsclient.Client, cfg.Conns)
	for i := range conns {
		nc, err := nats.Connect(cfg.URL, nats.Name(fmt.Sprintf("revd-bench-%d", i)))
		if err != nil {
			return nil, fmt.Errorf("natsload: connect %s: %w", cfg.URL, err)
		}
		defer nc.Close()
		conns[i] = natsclient.New(nc, natsclient.Options{Timeout: time.Minute})
	}

	requests := make(chan []byte, cfg.Clients)
	type result struct {
		lat time.Duration
		err error
	}
	results := make(chan result, 1024)
	value := make([]byte, cfg.ValSize)
	rand.Read(value)

	var wg sync.WaitGroup
	for i := range cfg.Clients {
		c := conns[i%cfg.Conns]
		wg.Go(func() {
			for key := range requests {
				st := time.Now()
				var err error
				switch cfg.Op {
				case Put:
					_, err = c.Put(ctx, &pb.PutRequest{Key: key, Value: value})
				case Range:
					_, err = c.Range(ctx, &pb.RangeRequest{Key: key, Serializable: cfg.Serializable})
				}
				results <- result{time.Since(st), err}
			}
		})
	}
	go func() {
		defer close(requests)
		for i := 0; i < cfg.Total; i++ {
			var key []byte
			if cfg.Op == Range {
				key = []byte(cfg.RangeKey)
			} else {
				key = make([]byte, cfg.KeySize)
				n := mrand.IntN(cfg.KeySpace)
				if cfg.SeqKeys {
					n = i % cfg.KeySpace
				}
				binary.PutVarint(key, int64(n))
			}
			select {
			case requests <- key:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	start := time.Now()
	lats := make([]time.Duration, 0, cfg.Total)
	var errs []string
	for r := range results {
		if r.err != nil {
			errs = append(errs, r.err.Error())
		} else {
			lats = append(lats, r.lat)
		}
		if cfg.Done != nil {
			cfg.Done.Add(1)
		}
	}
	return stats.Summarize(lats, errs, time.Since(start)), nil
}
