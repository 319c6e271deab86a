package natsapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// startKV is a WriteStarter that hands every started write to the test,
// which ends it by calling its done; it refuses read-only Txns, which its
// blocking Txn then serves. Range answers at once.
type startKV struct {
	pb.UnimplementedKVServer
	started chan startedWrite
}

type startedWrite struct {
	req  proto.Message
	done func(proto.Message, error)
}

func (k *startKV) StartWrite(_ context.Context, req proto.Message, done func(proto.Message, error)) bool {
	if !k.IsWrite(req) {
		return false
	}
	k.started <- startedWrite{req, done}
	return true
}

func (k *startKV) IsWrite(req proto.Message) bool {
	t, ok := req.(*pb.TxnRequest)
	return !ok || len(t.Success) > 0
}

func (k *startKV) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return &pb.TxnResponse{Succeeded: true}, nil
}

func (k *startKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Count: 1}, nil
}

// TestStartedWrites: with a WriteStarter, writes are started (no call of
// the blocking Put), keep their in-flight slot until done (writes and other
// calls, a read-only Txn among them, have slots of their own), and are
// answered from done; a request that is not a write goes to the blocking
// method; a payload that does not decode is refused first.
func TestStartedWrites(t *testing.T) {
	const guard = 10 * time.Second
	kv := &startKV{started: make(chan startedWrite, 4)}
	client, full := serveOneSlot(t, kv)

	type reply struct {
		msg *nats.Msg
		err error
	}
	request := func(subject string, data []byte) chan reply {
		ch := make(chan reply, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			m, err := client.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
			ch <- reply{m, err}
		}()
		return ch
	}
	encode := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	wait := func(ch chan reply) *nats.Msg {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.msg
		case <-time.After(guard):
			t.Fatal("no reply")
			return nil
		}
	}
	start := func() startedWrite {
		t.Helper()
		select {
		case w := <-kv.started:
			return w
		case <-time.After(guard):
			t.Fatal("no write started")
			return startedWrite{}
		}
	}

	put := request(SubjectPut, encode(&pb.PutRequest{Key: []byte("a")}))
	w := start()
	if r, ok := w.req.(*pb.PutRequest); !ok || string(r.Key) != "a" {
		t.Fatalf("started %v", w.req)
	}
	// The started put holds the only write slot until done: another put
	// waits, a range (a slot of its own kind) does not.
	put2 := request(SubjectPut, encode(&pb.PutRequest{Key: []byte("c")}))
	select {
	case s := <-full:
		if s != SubjectPut {
			t.Fatalf("waiting request on %q", s)
		}
	case <-time.After(guard):
		t.Fatal("the second put did not wait for the started put's slot")
	}
	var rr pb.RangeResponse
	if err := proto.Unmarshal(wait(request(SubjectRange, encode(&pb.RangeRequest{Key: []byte("b")}))).Data, &rr); err != nil || rr.Count != 1 {
		t.Fatalf("range reply %v, %v", &rr, err)
	}
	// Nor does a read-only Txn, though it comes on the Txn endpoint.
	var tr pb.TxnResponse
	if err := proto.Unmarshal(wait(request(SubjectTxn, encode(&pb.TxnRequest{}))).Data, &tr); err != nil || !tr.Succeeded {
		t.Fatalf("read-only txn reply %v, %v", &tr, err)
	}
	w.done(&pb.PutResponse{Header: &pb.ResponseHeader{Revision: 7}}, nil)
	var pr pb.PutResponse
	if err := proto.Unmarshal(wait(put).Data, &pr); err != nil || pr.Header.GetRevision() != 7 {
		t.Fatalf("put reply %v, %v; want revision 7", &pr, err)
	}
	w2 := start()
	if r, ok := w2.req.(*pb.PutRequest); !ok || string(r.Key) != "c" {
		t.Fatalf("started %v", w2.req)
	}
	w2.done(&pb.PutResponse{Header: &pb.ResponseHeader{Revision: 8}}, nil)
	if err := proto.Unmarshal(wait(put2).Data, &pr); err != nil || pr.Header.GetRevision() != 8 {
		t.Fatalf("second put reply %v, %v; want revision 8", &pr, err)
	}

	// A refused write is answered with its error.
	del := request(SubjectDeleteRange, encode(&pb.DeleteRangeRequest{Key: []byte("a")}))
	start().done(nil, rpctypes.ErrGRPCRequestTooLarge)
	m := wait(del)
	if code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); code != "3" || desc != "etcdserver: request is too large" {
		t.Fatalf("delete reply: code %q, %q", code, desc)
	}

	// A payload that does not decode starts nothing.
	m = wait(request(SubjectPut, []byte{0xff}))
	if code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); code != "3" || !strings.HasPrefix(desc, "revd: cannot decode etcdserverpb.PutRequest") {
		t.Fatalf("bad payload reply: code %q, %q", code, desc)
	}
	select {
	case w := <-kv.started:
		t.Fatalf("started %v", w.req)
	default:
	}
}
