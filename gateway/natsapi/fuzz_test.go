package natsapi_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/watch"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/journal"
	maintv1 "revd/protos/revd/maintenance/v1"
	"revd/server"
)

// fuzzEndpoints are the endpoints FuzzRequests sends to, with the message
// each answers. maintenance.checkpoint is left out: it writes a copy of the
// data directory wherever its request names.
var fuzzEndpoints = []struct {
	name string
	req  proto.Message // a valid request, for the seed corpus
	resp func() proto.Message
}{
	{natsapi.EndpointRange, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}, func() proto.Message { return new(pb.RangeResponse) }},
	{natsapi.EndpointPut, &pb.PutRequest{Key: []byte("a"), Value: []byte("v")}, func() proto.Message { return new(pb.PutResponse) }},
	{natsapi.EndpointDeleteRange, &pb.DeleteRangeRequest{Key: []byte("a")}, func() proto.Message { return new(pb.DeleteRangeResponse) }},
	{natsapi.EndpointTxn, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b")}}}},
	}, func() proto.Message { return new(pb.TxnResponse) }},
	{natsapi.EndpointCompact, &pb.CompactionRequest{Revision: 1}, func() proto.Message { return new(pb.CompactionResponse) }},
	{natsapi.EndpointStatus, &pb.StatusRequest{}, func() proto.Message { return new(pb.StatusResponse) }},
	{natsapi.EndpointLeaseGrant, &pb.LeaseGrantRequest{TTL: 60}, func() proto.Message { return new(pb.LeaseGrantResponse) }},
	{natsapi.EndpointLeaseRevoke, &pb.LeaseRevokeRequest{ID: 1}, func() proto.Message { return new(pb.LeaseRevokeResponse) }},
	{natsapi.EndpointLeaseTimeToLive, &pb.LeaseTimeToLiveRequest{ID: 1, Keys: true}, func() proto.Message { return new(pb.LeaseTimeToLiveResponse) }},
	{natsapi.EndpointLeaseLeases, &pb.LeaseLeasesRequest{}, func() proto.Message { return new(pb.LeaseLeasesResponse) }},
	{natsapi.EndpointLeaseKeepAlive, &pb.LeaseKeepAliveRequest{ID: 1}, func() proto.Message { return new(pb.LeaseKeepAliveResponse) }},
	{natsapi.EndpointHash, &maintv1.HashRequest{}, func() proto.Message { return new(maintv1.HashResponse) }},
	{natsapi.EndpointAlarm, &pb.AlarmRequest{Action: pb.AlarmRequest_GET}, func() proto.Message { return new(pb.AlarmResponse) }},
	{natsapi.EndpointHashKV, &pb.HashKVRequest{}, func() proto.Message { return new(pb.HashKVResponse) }},
	{natsapi.EndpointMemberList, &pb.MemberListRequest{}, func() proto.Message { return new(pb.MemberListResponse) }},
	{natsapi.EndpointAuthenticate, &pb.AuthenticateRequest{Name: "root", Password: "x"}, func() proto.Message { return new(pb.AuthenticateResponse) }},
	{natsapi.EndpointAuthStatus, &pb.AuthStatusRequest{}, func() proto.Message { return new(pb.AuthStatusResponse) }},
	{natsapi.EndpointWatchCreate, &pb.WatchCreateRequest{Key: []byte("a")}, nil},
	{natsapi.EndpointWatchCancel, &pb.WatchCancelRequest{WatchId: 0}, nil},
	{natsapi.EndpointWatchProgress, &pb.WatchProgressRequest{}, nil},
	{natsapi.EndpointWatchKeepAlive, nil, nil},
}

// FuzzRequests: a request to any endpoint, whatever its payload and its
// token, watch session and watch inbox headers, gets one reply, an error or
// the endpoint's answer (none for the watch endpoints), from a real revd
// server; and the service goes on answering.
func FuzzRequests(f *testing.F) {
	srv, err := server.New(server.Options{DataDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h := natsapitest.Start(f, srv, srv.Status, natsapi.Options{SubjectPrefix: "fuzz",
		Watch: srv, Lease: srv, Maintenance: srv, Auth: srv})
	for i, ep := range fuzzEndpoints {
		var valid []byte
		if ep.req != nil {
			valid, _ = proto.Marshal(ep.req)
		}
		f.Add(uint8(i), valid, "", "", "fuzz.inbox.1")
		f.Add(uint8(i), []byte{}, "", "", "")
		f.Add(uint8(i), []byte{0xff, 0xff, 0xff}, "token", "session", "")
		f.Add(uint8(i), append(valid, 0x0a, 0x80), "", "", "fuzz.kv.put") // truncated field; an inbox that is revd's
	}
	f.Fuzz(func(t *testing.T, ep uint8, payload []byte, token, session, inbox string) {
		e := fuzzEndpoints[int(ep)%len(fuzzEndpoints)]
		msg := nats.NewMsg(natsapi.Subject("fuzz", e.name))
		msg.Data = payload
		for k, v := range map[string]string{natsapi.HeaderToken: token, natsapi.HeaderWatchSession: session, natsapi.HeaderWatchInbox: inbox} {
			if v != "" {
				msg.Header.Set(k, v)
			}
		}
		reply, err := h.Conn.RequestMsg(msg, guard)
		if err != nil {
			// Header values NATS cannot carry are refused by the client.
			if bytes.ContainsAny([]byte(token+session+inbox), "\r\n") {
				return
			}
			t.Fatalf("%s: no reply: %v", e.name, err)
		}
		if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
			if reply.Header.Get(micro.ErrorHeader) == "" {
				t.Fatalf("%s: error %s without a description", e.name, code)
			}
			return
		}
		if e.resp == nil {
			if len(reply.Data) != 0 {
				t.Fatalf("%s: a watch endpoint answered %d bytes", e.name, len(reply.Data))
			}
			return
		}
		if err := proto.Unmarshal(reply.Data, e.resp()); err != nil {
			t.Fatalf("%s: the answer does not decode: %v", e.name, err)
		}
		// The service still answers.
		ok, err := h.Conn.RequestMsg(&nats.Msg{Subject: natsapi.Subject("fuzz", natsapi.EndpointStatus), Header: nats.Header{}}, guard)
		if err != nil || ok.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("after %s: status: %v %v", e.name, err, ok.Header)
		}
	})
}

// FuzzDecodeCommit: the commit feed's decoder takes any bytes without
// panicking, and what it decodes encodes and decodes to the same commit.
func FuzzDecodeCommit(f *testing.F) {
	c := &watch.Commit{CompactRev: 3, Records: []journal.Record{{Revision: 5, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 5, ModRevision: 5, Version: 1},
			PrevKv: &mvccpb.KeyValue{Key: []byte("k")}},
		{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("d"), ModRevision: 5}},
	}}}}
	valid, err := natsapi.EncodeCommit(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{0x12, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := natsapi.DecodeCommit(data)
		if err != nil {
			return
		}
		again, err := natsapi.EncodeCommit(c)
		if err != nil {
			t.Fatalf("a decoded commit does not encode: %v", err)
		}
		c2, err := natsapi.DecodeCommit(again)
		if err != nil {
			t.Fatalf("a re-encoded commit does not decode: %v", err)
		}
		if c.CompactRev != c2.CompactRev || len(c.Records) != len(c2.Records) {
			t.Fatalf("round trip changed the commit: %+v, %+v", c, c2)
		}
		for i := range c.Records {
			if c.Records[i].Revision != c2.Records[i].Revision || len(c.Records[i].Events) != len(c2.Records[i].Events) {
				t.Fatalf("round trip changed revision %d", i)
			}
			for j := range c.Records[i].Events {
				if !proto.Equal(c.Records[i].Events[j], c2.Records[i].Events[j]) {
					t.Fatalf("round trip changed event %d of revision %d", j, i)
				}
			}
		}
	})
}
