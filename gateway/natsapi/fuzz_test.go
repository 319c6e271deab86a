package natsapi_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
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
	h := natsapitest.Start(f, srv, srv.Maintenance().Status, natsapi.Options{SubjectPrefix: "fuzz",
		Watch: srv, Lease: srv.Lease(), Maintenance: srv.Maintenance(), Cluster: srv.Cluster(), Auth: srv.Auth()})
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
