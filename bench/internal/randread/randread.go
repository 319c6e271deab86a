// Package randread reads single keys picked at random from a data set that
// etcd's benchmark tool wrote, over etcd's gRPC API, the way the tool
// drives a server: Clients goroutines share Conns connections (client i
// uses connection i mod Conns), each request's latency is recorded. The
// tool's own range command reads one key over and over; reads of a data
// set larger than a server's caches need keys spread over all of it.
package randread

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/bench/internal/stats"
)

// Config describes a run.
type Config struct {
	// Endpoint is the server's client address, host:port.
	Endpoint string
	// Clients and Conns as in etcd's benchmark tool (defaults 1).
	Clients, Conns int
	// Total is the number of reads.
	Total int
	// Keys and KeySize describe the data set: the keys the tool's put
	// writes with --key-size=KeySize and --key-space-size=Keys (Key).
	Keys, KeySize int
	// Serializable makes the reads serializable; they are linearizable
	// by default.
	Serializable bool
	// Seed seeds the key choice, so that two servers get the same reads.
	Seed uint64
	// Done, if set, counts finished reads as they finish.
	Done *atomic.Int64
}

// Key is key n of a data set written by etcd's benchmark tool with
// --key-size=size: n as a varint in a buffer of size bytes, the rest
// zeros (the tool reuses its buffer, and with sequential keys a later
// varint is never shorter than an earlier one).
func Key(n, size int) []byte {
	k := make([]byte, size)
	binary.PutVarint(k, int64(n))
	return k
}

// Run reads cfg.Total random keys and summarizes the run. It fails only if
// it cannot connect; a failed read, or one that finds no value, counts in
// the summary's errors.
func Run(ctx context.Context, cfg Config) (*stats.Summary, error) {
	cfg.Clients, cfg.Conns, cfg.Keys = max(cfg.Clients, 1), max(cfg.Conns, 1), max(cfg.Keys, 1)
	kvs := make([]pb.KVClient, cfg.Conns)
	for i := range kvs {
		conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("randread: connect %s: %w", cfg.Endpoint, err)
		}
		defer conn.Close()
		kvs[i] = pb.NewKVClient(conn)
	}
	requests := make(chan []byte, cfg.Clients)
	type result struct {
		lat time.Duration
		err error
	}
	results := make(chan result, 1024)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		kv := kvs[i%cfg.Conns]
		wg.Go(func() {
			for key := range requests {
				st := time.Now()
				resp, err := kv.Range(ctx, &pb.RangeRequest{Key: key, Serializable: cfg.Serializable})
				if err == nil && len(resp.Kvs) != 1 {
					err = fmt.Errorf("randread: key %x: %d pairs", key, len(resp.Kvs))
				}
				results <- result{time.Since(st), err}
			}
		})
	}
	go func() {
		defer close(requests)
		rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
		for range cfg.Total {
			select {
			case requests <- Key(rng.IntN(cfg.Keys), cfg.KeySize):
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
