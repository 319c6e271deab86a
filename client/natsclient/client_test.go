package natsclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
)

func start(t *testing.T) (*natsclient.Client, *natsapitest.FakeKV, *natsapitest.Harness) {
	t.Helper()
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "c1"})
	return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "c1"}), kv, h
}

func TestRoundTrips(t *testing.T) {
	c, _, _ := start(t)
	ctx := context.Background()

	put, err := c.Put(ctx, &pb.PutRequest{Key: []byte("foo"), Value: []byte("bar")})
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.GetRevision() != 2 || put.Header.GetMemberId() != natsapitest.FakeMemberID {
		t.Fatalf("put header %v", put.Header)
	}
	put, err = c.Put(ctx, &pb.PutRequest{Key: []byte("foo"), Value: []byte("baz"), PrevKv: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(put.PrevKv.GetValue()) != "bar" {
		t.Fatalf("prev kv %v", put.PrevKv)
	}

	rng, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("foo")})
	if err != nil {
		t.Fatal(err)
	}
	if rng.Count != 1 || string(rng.Kvs[0].Value) != "baz" || rng.Kvs[0].Version != 2 || rng.Kvs[0].CreateRevision != 2 {
		t.Fatalf("range %v", rng)
	}
	old, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("foo"), Revision: 2})
	if err != nil {
		t.Fatal(err)
	}
	if string(old.Kvs[0].Value) != "bar" || old.Header.Revision != 3 {
		t.Fatalf("range at revision 2: %v", old)
	}

	txn, err := c.Txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("foo"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 5}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("x")}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("foo")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if txn.Succeeded || len(txn.Responses) != 1 || string(txn.Responses[0].GetResponseRange().Kvs[0].Value) != "baz" {
		t.Fatalf("txn %v", txn)
	}

	del, err := c.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("foo"), PrevKv: true})
	if err != nil {
		t.Fatal(err)
	}
	if del.Deleted != 1 || string(del.PrevKvs[0].Value) != "baz" || del.Header.Revision != 4 {
		t.Fatalf("delete %v", del)
	}

	if _, err := c.Compact(ctx, &pb.CompactionRequest{Revision: 3}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != "3.7.3" || st.Leader != natsapitest.FakeMemberID {
		t.Fatalf("status %v", st)
	}
}

func TestEtcdErrors(t *testing.T) {
	c, _, _ := start(t)
	ctx := context.Background()
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, &pb.CompactionRequest{Revision: 3}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { _, err := c.Put(ctx, &pb.PutRequest{}); return err }, rpctypes.ErrEmptyKey},
		{"compacted", func() error { _, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: 2}); return err }, rpctypes.ErrCompacted},
		{"future", func() error { _, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: 99}); return err }, rpctypes.ErrFutureRev},
		{"compact again", func() error { _, err := c.Compact(ctx, &pb.CompactionRequest{Revision: 3}); return err }, rpctypes.ErrCompacted},
		{"key not found", func() error {
			_, err := c.Put(ctx, &pb.PutRequest{Key: []byte("nope"), IgnoreValue: true})
			return err
		}, rpctypes.ErrKeyNotFound},
		{"lease not found", func() error { _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k"), Lease: 7}); return err }, rpctypes.ErrLeaseNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			// As with clientv3, the error is the rpctypes value itself.
			if err != tc.want || !errors.Is(err, tc.want) {
				t.Fatalf("error %#v, want %#v", err, tc.want)
			}
			var ee rpctypes.EtcdError
			if !errors.As(err, &ee) || ee.Code() != tc.want.(rpctypes.EtcdError).Code() {
				t.Fatalf("error %v has no etcd code", err)
			}
		})
	}
}

// fixedKV fails every put with err.
type fixedKV struct {
	pb.UnimplementedKVServer
	err error
}

func (f fixedKV) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) { return nil, f.err }

func TestOtherErrors(t *testing.T) {
	kv := fixedKV{err: status.Error(codes.PermissionDenied, "not etcd's text")}
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(natsapitest.NewFakeKV()), natsapi.Options{})
	c := natsclient.New(h.Conn, natsclient.Options{})
	_, err := c.Put(context.Background(), &pb.PutRequest{Key: []byte("k")})
	if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != "not etcd's text" {
		t.Fatalf("error %v, want a PermissionDenied status", err)
	}
	// Unimplemented calls come back as gRPC's Unimplemented.
	_, err = c.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("error %v, want Unimplemented", err)
	}
}

func TestNoServer(t *testing.T) {
	_, _, h := start(t)
	c := natsclient.New(h.Conn, natsclient.Options{}) // default prefix: nobody serves it
	_, err := c.Put(context.Background(), &pb.PutRequest{Key: []byte("k")})
	if err == nil || err.Error() != "natsclient: no revd server is serving revd.kv.put" {
		t.Fatalf("error %v", err)
	}
	if !errors.Is(err, natsclient.ErrNoServer) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("error %v does not match ErrNoServer and nats.ErrNoResponders", err)
	}
}

// respondWith answers every request on subject with msg.
func respondWith(t *testing.T, nc *nats.Conn, subject string, reply func(m *nats.Msg)) {
	t.Helper()
	sub, err := nc.Subscribe(subject, reply)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestBadReplies(t *testing.T) {
	_, _, h := start(t)
	other := natsapitest.Connect(t, h.Server, "fake-responder")
	respondWith(t, other, "bad.kv.range", func(m *nats.Msg) { _ = m.Respond([]byte{0x0a, 100}) })
	respondWith(t, other, "bad.kv.put", func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{micro.ErrorCodeHeader: {"5x"}, micro.ErrorHeader: {"boom"}}})
	})
	c := natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "bad"})
	if _, err := c.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")}); !errors.Is(err, natsclient.ErrBadReply) {
		t.Fatalf("undecodable reply: %v", err)
	}
	if _, err := c.Put(context.Background(), &pb.PutRequest{Key: []byte("k")}); !errors.Is(err, natsclient.ErrBadReply) {
		t.Fatalf("bad error code: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	_, _, h := start(t)
	other := natsapitest.Connect(t, h.Server, "silent-responder")
	answered := make(chan struct{})
	respondWith(t, other, "slow.kv.range", func(m *nats.Msg) { <-answered })
	defer close(answered)

	c := natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "slow", Timeout: time.Millisecond})
	_, err := c.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline error", err)
	}

	c = natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "slow"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("k")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestConcurrentClients(t *testing.T) {
	c, kv, _ := start(t)
	const n = 50
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Put(context.Background(), &pb.PutRequest{Key: []byte{'k', byte(i)}})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if kv.Rev() != n+1 {
		t.Fatalf("revision %d after %d puts", kv.Rev(), n)
	}
}
