package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/tests/conformance"
	"revd/tests/testutil"
)

// natsOps is the size of the random workload sent over both transports.
const natsOps = 2000

// natsCall sends one request through revd's NATS front door.
func natsCall(c *natsclient.Client) func(proto.Message) conformance.Answer {
	return func(req proto.Message) conformance.Answer {
		ctx, cancel := context.WithTimeout(context.Background(), conformance.OpTimeout)
		defer cancel()
		switch r := req.(type) {
		case *pb.RangeRequest:
			return answer(c.Range(ctx, r))
		case *pb.PutRequest:
			return answer(c.Put(ctx, r))
		case *pb.DeleteRangeRequest:
			return answer(c.DeleteRange(ctx, r))
		case *pb.TxnRequest:
			return answer(c.Txn(ctx, r))
		case *pb.CompactionRequest:
			return answer(c.Compact(ctx, r))
		case *pb.StatusRequest:
			return answer(c.Status(ctx, r))
		}
		panic(fmt.Sprintf("natsCall: unsupported request %T", req))
	}
}

func answer[T proto.Message](resp T, err error) conformance.Answer {
	if err != nil {
		return conformance.Answer{Err: err}
	}
	return conformance.Answer{Resp: resp}
}

func connectNATS(t *testing.T, p *testutil.Proc) *natsclient.Client {
	t.Helper()
	if p.NATSURL == "" {
		t.Fatalf("%s has no NATS URL", p.Kind)
	}
	nc, err := nats.Connect(p.NATSURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("connect to revd's NATS at %s: %v", p.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	return natsclient.New(nc, natsclient.Options{Timeout: conformance.OpTimeout})
}

// TestNATSMatchesGRPC sends the same seeded random workload to two fresh
// revd servers, one through gRPC and one through the NATS front door, and
// requires identical answers and errors (code and message). It is about
// revd's own NATS gateway, so it always runs revd, whatever REVD_E2E_TARGET
// says.
func TestNATSMatchesGRPC(t *testing.T) {
	a := testutil.StartRevd(t, testutil.Options{})
	b := testutil.StartRevd(t, testutil.Options{})
	h := &conformance.Harness{
		T:      t,
		Ref:    conformance.GRPCServer("revd over gRPC", a, a.Dial(t)),
		Target: &conformance.Server{Name: "revd over NATS", Proc: b, Call: natsCall(connectNATS(t, b))},
		Seed:   time.Now().UnixNano(),
		Stats:  map[string]int{},
	}
	t.Logf("seed %d", h.Seed)
	g := conformance.NewGen(h.Seed)
	for i := range natsOps {
		req := g.Next()
		g.Observe(req, h.Do(fmt.Sprintf("op %d", i), req))
	}
	h.LogStats()

	// Status through both doors: same shape, same version strings.
	want := h.Ref.Call(&pb.StatusRequest{})
	got := h.Target.Call(&pb.StatusRequest{})
	if want.Err != nil || got.Err != nil {
		t.Fatalf("Status: gRPC %v, NATS %v", want.Err, got.Err)
	}
	w, err := conformance.CheckStatusShape(h.Ref, want.Resp.(*pb.StatusResponse))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := conformance.CheckStatusShape(h.Target, got.Resp.(*pb.StatusResponse))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(w, g2) {
		t.Fatalf("Status differs:\ngRPC: %v\nNATS: %v", want.Resp, got.Resp)
	}
}

// TestNATSAndGRPCShareOneStore interleaves both doors of one revd: what one
// writes the other reads, and the same read answers byte for byte the same
// (same header ids and term) through both.
func TestNATSAndGRPCShareOneStore(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	g := p.Dial(t)
	grpcCall := func(req proto.Message) conformance.Answer { return conformance.Call(g, req) }
	natsC := natsCall(connectNATS(t, p))

	same := func(label string, req proto.Message) conformance.Answer {
		t.Helper()
		x, y := grpcCall(req), natsC(req)
		if x.Code() != y.Code() || x.Message() != y.Message() || (x.Err == nil && !proto.Equal(x.Resp, y.Resp)) {
			t.Fatalf("%s: gRPC and NATS answers differ on one server\ngRPC: %s\nNATS: %s", label, x, y)
		}
		return x
	}
	mustOK := func(label string, a conformance.Answer) {
		t.Helper()
		if a.Err != nil {
			t.Fatalf("%s: %v", label, a.Err)
		}
	}
	mustOK("put over NATS", natsC(&pb.PutRequest{Key: []byte("n"), Value: []byte("from nats")}))
	mustOK("put over gRPC", grpcCall(&pb.PutRequest{Key: []byte("g"), Value: []byte("from grpc")}))
	mustOK("txn over NATS", natsC(&pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("t"), Value: []byte("txn")}}}}}))
	all := &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}
	r := same("read all", all)
	if r.Err != nil || len(r.Resp.(*pb.RangeResponse).Kvs) != 3 {
		t.Fatalf("read all: want the 3 keys written through both doors, got %s", r)
	}
	same("read at revision 2", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: 2})
	same("future revision", &pb.RangeRequest{Key: []byte("n"), Revision: 100})
	same("empty key", &pb.RangeRequest{})
	same("invalid sort", &pb.RangeRequest{Key: []byte("n"), SortOrder: 9})
	same("read-only txn", &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: all}}}})
	mustOK("compact over NATS", natsC(&pb.CompactionRequest{Revision: 3}))
	same("compacted read", &pb.RangeRequest{Key: []byte("n"), Revision: 2})
	same("compact again", &pb.CompactionRequest{Revision: 3})
	mustOK("delete over gRPC", grpcCall(&pb.DeleteRangeRequest{Key: []byte("n")}))
	same("read all after delete", all)
}

// TestNATSWriteReplyTooLarge: a write whose reply cannot fit in a NATS
// message (a delete with prev_kv of 9.8 MB of values, above the embedded
// server's 8 MiB max_payload) is carried out, as it is over gRPC; the NATS
// caller gets ResourceExhausted saying so, with the write's revision in the
// message and the Revd-Revision header, so that it reads the result back
// instead of sending the write again. A Txn whose taken branch only read is
// told it wrote nothing.
func TestNATSWriteReplyTooLarge(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := make([]byte, 1400_000)
	for i := range 7 {
		if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("hk%d", i)), Value: big}); err != nil {
			t.Fatal(err)
		}
	} // revisions 2..8
	nc, err := nats.Connect(p.NATSURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A Txn that could write but took a branch that only reads wrote
	// nothing, and is told so.
	data, _ := proto.Marshal(&pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("hk0"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 99}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("lock"), Value: []byte("me")}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("hk"), RangeEnd: []byte("hl")}}}},
	})
	msg, err := nc.RequestWithContext(ctx, natsapi.SubjectTxn, data)
	if err != nil {
		t.Fatal(err)
	}
	if code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader); code != "8" ||
		!strings.Contains(desc, "the transaction ran (succeeded: false) and wrote nothing (revision 8)") || msg.Header.Get(natsapi.HeaderRevision) != "" {
		t.Fatalf("txn reply: code %q, %q, %s %q", code, desc, natsapi.HeaderRevision, msg.Header.Get(natsapi.HeaderRevision))
	}

	data, _ = proto.Marshal(&pb.DeleteRangeRequest{Key: []byte("hk"), RangeEnd: []byte("hl"), PrevKv: true})
	msg, err = nc.RequestWithContext(ctx, natsapi.SubjectDeleteRange, data)
	if err != nil {
		t.Fatal(err)
	}
	code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
	if code != "8" || !strings.Contains(desc, "the write was carried out, at revision 9") || msg.Header.Get(natsapi.HeaderRevision) != "9" {
		t.Fatalf("reply: code %q, %q, %s %q", code, desc, natsapi.HeaderRevision, msg.Header.Get(natsapi.HeaderRevision))
	}
	resp, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("hk"), RangeEnd: []byte("hl"), CountOnly: true})
	if err != nil || resp.Count != 0 || resp.Header.Revision != 9 {
		t.Fatalf("after the delete: %v %v, want no keys at revision 9", resp, err)
	}
}
