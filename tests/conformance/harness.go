// Package conformance is revd's differential test against a real etcd 3.7.3:
// the same requests go, one at a time, to a fresh etcd and to a fresh target
// (revd, or a second etcd to validate the harness), and every answer and
// every error must be identical up to what legitimately differs between two
// servers (cluster_id, member_id, raft_term in the outer response header).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TargetEnv selects the server under test: "revd" (default) or "etcd".
const TargetEnv = "REVD_CONFORMANCE_TARGET"

// OpTimeout bounds one request to one server.
const OpTimeout = 20 * time.Second

// Answer is one server's answer to one request.
type Answer struct {
	Resp proto.Message // nil on error
	Err  error
}

// NewClusterHarness starts a reference etcd and a target of n members each,
// with the same options (their flags), and sends the requests to a
// follower of each.
func NewClusterHarness(t testing.TB, n int, opts testutil.Options) *Harness {
	t.Helper()
	kind := testutil.TargetKind(t, TargetEnv)
	args := opts.ExtraArgs
	if opts.MaxRequestBytes != 0 {
		args = append([]string{fmt.Sprintf("--max-request-bytes=%d", opts.MaxRequestBytes)}, args...)
	}
	follower := func(kind string) *testutil.Proc {
		c := testutil.StartCluster(t, kind, testutil.ClusterOptions{Members: n, ExtraArgs: args})
		return &testutil.Proc{Server: c.Members[(c.Leader()+1)%n]}
	}
	ref, tgt := follower(testutil.KindEtcd), follower(kind)
	return &Harness{
		T:       t,
		Ref:     GRPCServer(fmt.Sprintf("etcd 3.7.3 (a follower of %d)", n), ref, ref.Dial(t)),
		Target:  GRPCServer(fmt.Sprintf("%s (a follower of %d)", kind, n), tgt, tgt.Dial(t)),
		Stats:   map[string]int{},
		Trace:   traceAll,
		Members: n,
	}
}

// membersFromEnv reads MembersEnv: 1 when unset.
func membersFromEnv(t testing.TB) int {
	v := os.Getenv(MembersEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of members", MembersEnv, v)
	}
	return n
}

// Code and Message of the error (codes.OK and "" without one).
// Besides gRPC status errors, the etcd client's rpctypes.EtcdError (what
// revd's NATS client returns) is understood.
func (a Answer) Code() codes.Code {
	if a.Err == nil {
		return codes.OK
	}
	var ee rpctypes.EtcdError
	if errors.As(a.Err, &ee) {
		return ee.Code()
	}
	return status.Code(a.Err)
}

func (a Answer) Message() string {
	if a.Err == nil {
		return ""
	}
	var ee rpctypes.EtcdError
	if errors.As(a.Err, &ee) {
		return ee.Error()
	}
	if s, ok := status.FromError(a.Err); ok {
		return s.Message()
	}
	return a.Err.Error()
}

func (a Answer) String() string {
	if a.Err != nil {
		return fmt.Sprintf("error code=%s message=%q", a.Code(), a.Message())
	}
	return fmt.Sprintf("%T %s", a.Resp, text(a.Resp))
}

// Server is one side of the comparison.
type Server struct {
	Name    string
	Proc    *testutil.Proc
	Clients *testutil.Clients
	// Call sends one request (see the package-level Call); NewHarness sets
	// it to the raw gRPC clients, other transports may replace it.
	Call func(req proto.Message) Answer

	// Tokens are the server's auth tokens, by user name (see Login).
	Tokens map[string]string

	// Identity seen in the first header; every later header must repeat it.
	clusterID, memberID uint64
	raftTerm            uint64
}

// Harness sends each request to the reference etcd and to the target and
// compares the answers.
type Harness struct {
	T      testing.TB
	Ref    *Server
	Target *Server
	// Seed is printed with every mismatch so that it can be reproduced.
	Seed int64
	// Stats counts the reference's outcomes by request type and error.
	Stats map[string]int
	// Trace logs every request with etcd's answer.
	Trace bool
	// Members is the number of members of each side's cluster (1: single
	// members).
	Members int
}

// MembersEnv runs every comparison against clusters of that many members
// (REVD_CONFORMANCE_MEMBERS=3): a 3-member etcd and a 3-member target, the
// requests sent to a follower of each (a write then goes to the leader).
const MembersEnv = "REVD_CONFORMANCE_MEMBERS"

// NewHarness starts a fresh reference etcd and a fresh target of the kind
// selected by REVD_CONFORMANCE_TARGET, with the same options: single
// members, or clusters as REVD_CONFORMANCE_MEMBERS says (options that a
// cluster does not take, TLS and the like, keep single members).
func NewHarness(t testing.TB, opts testutil.Options) *Harness {
	t.Helper()
	if n := membersFromEnv(t); n > 1 && opts.TLS == nil && !opts.ConfigFile && opts.DataDir == "" && opts.NATSURL == "" {
		return NewClusterHarness(t, n, opts)
	}
	kind := testutil.TargetKind(t, TargetEnv)
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	return &Harness{
		T:       t,
		Ref:     GRPCServer("etcd 3.7.3", ref, ref.Dial(t)),
		Target:  GRPCServer(kind, tgt, tgt.Dial(t)),
		Stats:   map[string]int{},
		Trace:   traceAll,
		Members: 1,
	}
}

// GRPCServer is a side of the comparison reached through raw gRPC clients.
func GRPCServer(name string, p *testutil.Proc, c *testutil.Clients) *Server {
	return &Server{Name: name, Proc: p, Clients: c, Call: func(req proto.Message) Answer { return Call(c, req) }}
}

// StreamRange is a RangeRequest sent as KV.RangeStream. Its answer is
// every chunk, in order, as the ResponseRange ops of a TxnResponse whose
// header is the last chunk's (the only chunk that carries one): so the
// chunking itself, not only the merged result, is compared.
type StreamRange struct{ *pb.RangeRequest }

// Call sends req (a *pb.RangeRequest, StreamRange, PutRequest,
// DeleteRangeRequest, TxnRequest, CompactionRequest, StatusRequest or
// AlarmRequest, DefragmentRequest, MoveLeaderRequest, one of the Cluster
// requests or one of the Auth requests an auth store without users answers)
// to one server.
func Call(c *testutil.Clients, req proto.Message) Answer {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	ctx, req = tokenContext(ctx, req)
	var resp proto.Message
	var err error
	switch r := req.(type) {
	case StreamRange:
		resp, err = nilIfErr(rangeStream(ctx, c, r.RangeRequest))
	case *pb.RangeRequest:
		resp, err = nilIfErr(c.KV.Range(ctx, r))
	case *pb.PutRequest:
		resp, err = nilIfErr(c.KV.Put(ctx, r))
	case *pb.DeleteRangeRequest:
		resp, err = nilIfErr(c.KV.DeleteRange(ctx, r))
	case *pb.TxnRequest:
		resp, err = nilIfErr(c.KV.Txn(ctx, r))
	case *pb.CompactionRequest:
		resp, err = nilIfErr(c.KV.Compact(ctx, r))
	case *pb.StatusRequest:
		resp, err = nilIfErr(c.Maintenance.Status(ctx, r))
	case *pb.AlarmRequest:
		resp, err = nilIfErr(c.Maintenance.Alarm(ctx, r))
	case *pb.DefragmentRequest:
		resp, err = nilIfErr(c.Maintenance.Defragment(ctx, r))
	case *pb.HashKVRequest:
		resp, err = nilIfErr(c.Maintenance.HashKV(ctx, r))
	case *pb.MoveLeaderRequest:
		resp, err = nilIfErr(c.Maintenance.MoveLeader(ctx, r))
	case *pb.MemberListRequest:
		resp, err = nilIfErr(c.Cluster.MemberList(ctx, r))
	case *pb.MemberAddRequest:
		resp, err = nilIfErr(c.Cluster.MemberAdd(ctx, r))
	case *pb.MemberRemoveRequest:
		resp, err = nilIfErr(c.Cluster.MemberRemove(ctx, r))
	case *pb.MemberUpdateRequest:
		resp, err = nilIfErr(c.Cluster.MemberUpdate(ctx, r))
	case *pb.MemberPromoteRequest:
		resp, err = nilIfErr(c.Cluster.MemberPromote(ctx, r))
	case *pb.DowngradeRequest:
		resp, err = nilIfErr(c.Maintenance.Downgrade(ctx, r))
	case *pb.AuthStatusRequest:
		resp, err = nilIfErr(c.Auth.AuthStatus(ctx, r))
	case *pb.AuthenticateRequest:
		resp, err = nilIfErr(c.Auth.Authenticate(ctx, r))
	case *pb.AuthDisableRequest:
		resp, err = nilIfErr(c.Auth.AuthDisable(ctx, r))
	case *pb.AuthEnableRequest:
		resp, err = nilIfErr(c.Auth.AuthEnable(ctx, r))
	case *pb.AuthUserListRequest:
		resp, err = nilIfErr(c.Auth.UserList(ctx, r))
	case *pb.AuthRoleListRequest:
		resp, err = nilIfErr(c.Auth.RoleList(ctx, r))
	case *pb.AuthUserGetRequest:
		resp, err = nilIfErr(c.Auth.UserGet(ctx, r))
	case *pb.AuthRoleGetRequest:
		resp, err = nilIfErr(c.Auth.RoleGet(ctx, r))
	case *pb.AuthUserDeleteRequest:
		resp, err = nilIfErr(c.Auth.UserDelete(ctx, r))
	case *pb.AuthRoleDeleteRequest:
		resp, err = nilIfErr(c.Auth.RoleDelete(ctx, r))
	case *pb.AuthUserChangePasswordRequest:
		resp, err = nilIfErr(c.Auth.UserChangePassword(ctx, r))
	case *pb.AuthUserGrantRoleRequest:
		resp, err = nilIfErr(c.Auth.UserGrantRole(ctx, r))
	case *pb.AuthUserRevokeRoleRequest:
		resp, err = nilIfErr(c.Auth.UserRevokeRole(ctx, r))
	case *pb.AuthRoleGrantPermissionRequest:
		resp, err = nilIfErr(c.Auth.RoleGrantPermission(ctx, r))
	case *pb.AuthRoleRevokePermissionRequest:
		resp, err = nilIfErr(c.Auth.RoleRevokePermission(ctx, r))
	case *pb.AuthUserAddRequest:
		resp, err = nilIfErr(c.Auth.UserAdd(ctx, r))
	case *pb.AuthRoleAddRequest:
		resp, err = nilIfErr(c.Auth.RoleAdd(ctx, r))
	default:
		panic(fmt.Sprintf("conformance: unsupported request %T", req))
	}
	return Answer{Resp: resp, Err: err}
}

func rangeStream(ctx context.Context, c *testutil.Clients, r *pb.RangeRequest) (*pb.TxnResponse, error) {
	st, err := c.KV.RangeStream(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &pb.TxnResponse{}
	for {
		chunk, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		rr := chunk.RangeResponse
		if rr.GetHeader() != nil {
			if out.Header != nil {
				return nil, fmt.Errorf("RangeStream: two chunks carry a header")
			}
			out.Header, rr.Header = rr.Header, nil
		}
		out.Responses = append(out.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}})
	}
}

func nilIfErr[T proto.Message](resp T, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Do sends req to the reference and then to the target and fails the test
// (Fatal) if the answers differ. label identifies the request in the
// failure message (e.g. "op 123" or a scenario step). It returns the
// reference's answer.
func (h *Harness) Do(label string, req proto.Message) Answer {
	h.T.Helper()
	return h.DoEach(label, req, req)
}

// DoEach is Do for a request that must name something of each server's
// own, such as its member id: ref goes to the reference, req to the target.
func (h *Harness) DoEach(label string, ref, req proto.Message) Answer {
	h.T.Helper()
	want := h.Ref.Call(ref)
	if h.Ref.Proc != nil && want.Code() == codes.Unavailable && refDied(h.Ref.Proc) {
		h.T.Fatalf("%s: the reference %s died on this request (an etcd bug the workload must avoid):\n%s\nanswer: %s",
			label, h.Ref.Name, indent(clip(text(ref))), want)
	}
	got := h.Target.Call(req)
	h.count(req, want)
	if h.Trace {
		h.T.Logf("%s: %T %s\n  => %s", label, req, oneLine(req), oneLineAnswer(want))
	}
	if diff := h.compare(want, got); diff != "" {
		seed := ""
		if h.Seed != 0 {
			seed = fmt.Sprintf(" (seed %d, reproduce with -seed=%d)", h.Seed, h.Seed)
		}
		fail := h.T.Fatalf
		if keepGoing {
			fail = h.T.Errorf
		}
		fail("MISMATCH at %s%s\nrequest %T:\n%s\n%s\n%s answered:\n%s\n%s answered:\n%s",
			label, seed, req, indent(clip(text(req))), diff, h.Ref.Name, indent(clip(want.String())), h.Target.Name, indent(clip(got.String())))
	}
	return want
}

func (h *Harness) count(req proto.Message, a Answer) {
	name := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", req), "*etcdserverpb."), "Request")
	if a.Err != nil {
		name += " -> " + a.Message()
	} else if tr, ok := a.Resp.(*pb.TxnResponse); ok {
		name += fmt.Sprintf(" -> succeeded=%v", tr.Succeeded)
	} else {
		name += " -> ok"
	}
	h.Stats[name]++
}

// compare returns "" when the answers are equivalent, else what differs.
func (h *Harness) compare(want, got Answer) string {
	if (want.Err == nil) != (got.Err == nil) || want.Code() != got.Code() || want.Message() != got.Message() {
		return fmt.Sprintf("errors differ: want code=%s message=%q, got code=%s message=%q",
			want.Code(), want.Message(), got.Code(), got.Message())
	}
	if want.Err != nil {
		return ""
	}
	w, err := h.Ref.normalize(want.Resp)
	if err != nil {
		return "reference etcd: " + err.Error()
	}
	g, err := h.Target.normalize(got.Resp)
	if err != nil {
		return err.Error()
	}
	if !proto.Equal(w, g) {
		return "responses differ (after clearing cluster_id, member_id, raft_term of the outer header)\n" + firstDiff(text(w), text(g))
	}
	return ""
}

// normalize checks the outer response header of resp (present; cluster_id,
// member_id, raft_term non-zero and consistent with earlier answers) and
// returns a copy with those three fields cleared. Headers nested inside a Txn
// response are not touched: they must match etcd exactly.
func (s *Server) normalize(resp proto.Message) (proto.Message, error) {
	resp = proto.Clone(resp)
	r, ok := resp.(interface{ GetHeader() *pb.ResponseHeader })
	if !ok {
		return nil, fmt.Errorf("%s: unexpected response type %T", s.Name, resp)
	}
	hdr := r.GetHeader()
	switch resp.(type) {
	case *pb.DefragmentResponse, *pb.MoveLeaderResponse:
		if hdr == nil {
			return resp, nil // etcd's have none
		}
	}
	if err := s.CheckHeader(hdr); err != nil {
		return nil, err
	}
	hdr.ClusterId, hdr.MemberId, hdr.RaftTerm = 0, 0, 0
	return resp, nil
}

// CheckHeader verifies that an outer response header is present, that
// cluster_id, member_id and raft_term are non-zero, that the ids never
// change and that raft_term never decreases.
func (s *Server) CheckHeader(hdr *pb.ResponseHeader) error {
	if hdr == nil {
		return fmt.Errorf("%s: response has no header", s.Name)
	}
	if hdr.ClusterId == 0 || hdr.MemberId == 0 || hdr.RaftTerm == 0 {
		return fmt.Errorf("%s: header must carry non-zero cluster_id, member_id and raft_term: %s", s.Name, text(hdr))
	}
	if s.clusterID == 0 {
		s.clusterID, s.memberID = hdr.ClusterId, hdr.MemberId
	}
	if hdr.ClusterId != s.clusterID || hdr.MemberId != s.memberID {
		return fmt.Errorf("%s: header identity changed: first cluster_id=%d member_id=%d, now %s", s.Name, s.clusterID, s.memberID, text(hdr))
	}
	if hdr.RaftTerm < s.raftTerm {
		return fmt.Errorf("%s: raft_term went back from %d: %s", s.Name, s.raftTerm, text(hdr))
	}
	s.raftTerm = hdr.RaftTerm
	return nil
}

// LogStats writes the outcome counts to the test log.
func (h *Harness) LogStats() {
	h.T.Helper()
	var b strings.Builder
	for _, k := range sortedKeys(h.Stats) {
		fmt.Fprintf(&b, "  %6d  %s\n", h.Stats[k], k)
	}
	h.T.Logf("outcomes (as answered by %s):\n%s", h.Ref.Name, b.String())
}

func text(m proto.Message) string {
	if m == nil {
		return "<nil>"
	}
	b, err := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.TrimRight(string(b), "\n")
}

func indent(s string) string {
	if s == "" {
		return "    <empty>"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func oneLine(m proto.Message) string {
	b, err := prototext.MarshalOptions{}.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func oneLineAnswer(a Answer) string {
	if a.Err != nil {
		return fmt.Sprintf("error code=%s message=%q", a.Code(), a.Message())
	}
	return oneLine(a.Resp)
}

// traceAll and keepGoing are set by the -oplog and -keepgoing test flags
// (see conformance_test.go).
var traceAll, keepGoing bool

// clip shortens very long texts (txns of 128 ops) for failure messages.
func clip(s string) string {
	const head, tail = 6000, 2000
	if len(s) <= head+tail {
		return s
	}
	return fmt.Sprintf("%s\n... (%d bytes left out) ...\n%s", s[:head], len(s)-head-tail, s[len(s)-tail:])
}

// firstDiff shows where two multi-line texts first differ, with context.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	excerpt := func(lines []string) string {
		from, to := max(i-3, 0), min(i+4, len(lines))
		var b strings.Builder
		for j := from; j < to; j++ {
			mark := "  "
			if j == i {
				mark = "> "
			}
			b.WriteString(mark + lines[j] + "\n")
		}
		if i >= len(lines) {
			b.WriteString("> <end>\n")
		}
		return strings.TrimRight(b.String(), "\n")
	}
	return fmt.Sprintf("first difference at line %d (normalized):\n  reference (etcd):\n%s\n  target:\n%s", i+1, indent(excerpt(wl)), indent(excerpt(gl)))
}

// refDied reports whether the process exits within a few seconds (after an
// Unavailable answer, which is what a dying server gives).
func refDied(p *testutil.Proc) bool {
	select {
	case <-p.Exited():
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
