package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/server"
)

// The benchmarks below call revd through grpc-go over loopback TCP, client
// and server in this process, as etcd's benchmark tool does (100 clients
// on 10 connections). Besides ns/op (wall time: the disk's fsync for puts)
// they report cpu-ns/op, the process's CPU time (user and system) per call,
// client included: the figure to compare before and after a change to the
// server's path, whatever else the machine is running.

// benchServer serves a fresh revd through New on a loopback port and
// returns conns client connections to it.
func benchServer(b *testing.B, conns int) []pb.KVClient {
	b.Helper()
	srv, err := server.New(server.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := New(srv, Options{})
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	var kvs []pb.KVClient
	for range conns {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		kvs = append(kvs, pb.NewKVClient(cc))
	}
	b.Cleanup(func() {
		gs.Stop()
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
	})
	return kvs
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClients runs b.N calls of call from clients goroutines spread over
// kvs, and reports cpu-ns/op.
func runClients(b *testing.B, kvs []pb.KVClient, clients int, call func(kv pb.KVClient, i int64) error) {
	b.Helper()
	var n atomic.Int64
	errc := make(chan error, clients)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for c := range clients {
		kv := kvs[c%len(kvs)]
		go func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					errc <- nil
					return
				}
				if err := call(kv, i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for range clients {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkGRPCPut: puts of 256-byte values to 100,000 keys, each
// acknowledged once fsynced.
func BenchmarkGRPCPut(b *testing.B) {
	for _, clients := range []int{1, 100} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			kvs := benchServer(b, min(clients, 10))
			val := make([]byte, 256)
			runClients(b, kvs, clients, func(kv pb.KVClient, i int64) error {
				_, err := kv.Put(context.Background(), &pb.PutRequest{Key: fmt.Appendf(nil, "%08d", i%100000), Value: val})
				return err
			})
		})
	}
}

// BenchmarkGRPCRange: linearizable reads of one key holding a value of
// the given size.
func BenchmarkGRPCRange(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			kvs := benchServer(b, 10)
			if _, err := kvs[0].Put(context.Background(), &pb.PutRequest{Key: []byte("foo"), Value: make([]byte, size)}); err != nil {
				b.Fatal(err)
			}
			runClients(b, kvs, 100, func(kv pb.KVClient, _ int64) error {
				_, err := kv.Range(context.Background(), &pb.RangeRequest{Key: []byte("foo")})
				return err
			})
		})
	}
}
