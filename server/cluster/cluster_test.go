package cluster

import (
	"context"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/protobuf/proto"
)

// access lets everyone through RequireUser, and only root through
// RequireAdmin.
type access struct{ root bool }

func (access) RequireUser(context.Context) error { return nil }

func (a access) RequireAdmin(context.Context) error {
	if !a.root {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// members is a membership in memory whose changes fail with err, if set.
type members struct {
	list []*pb.Member
	err  error
}

func (m *members) Members() []*pb.Member { return m.list }

func (m *members) Add(_ context.Context, urls types.URLs, learner bool) (*pb.Member, error) {
	if m.err != nil {
		return nil, m.err
	}
	add := &pb.Member{ID: uint64(len(m.list) + 10), PeerURLs: urls.StringSlice(), IsLearner: learner}
	m.list = append(m.list, add)
	return add, nil
}

func (m *members) find(id uint64) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	for i, x := range m.list {
		if x.ID == id {
			return i, nil
		}
	}
	return 0, rpctypes.ErrGRPCMemberNotFound
}

func (m *members) Remove(_ context.Context, id uint64) error {
	i, err := m.find(id)
	if err == nil {
		m.list = append(m.list[:i], m.list[i+1:]...)
	}
	return err
}

func (m *members) Update(_ context.Context, id uint64, urls types.URLs) error {
	i, err := m.find(id)
	if err == nil {
		m.list[i].PeerURLs = urls.StringSlice()
	}
	return err
}

func (m *members) Promote(_ context.Context, id uint64) error {
	i, err := m.find(id)
	if err == nil {
		m.list[i].IsLearner = false
	}
	return err
}

// TestCalls: each call checks its peer URLs, then the caller's role, then
// runs its change at the leader, under its own name, and answers the
// members after it; the membership's refusals come through as they are.
func TestCalls(t *testing.T) {
	ctx := context.Background()
	ms := &members{list: []*pb.Member{{ID: 7, Name: "default", PeerURLs: []string{"http://10.0.0.1:2380"}}}}
	var ran []string
	opts := Options{Access: access{root: true}, Membership: ms,
		Header: func() *pb.ResponseHeader { return &pb.ResponseHeader{ClusterId: 1, MemberId: 7, RaftTerm: 2} },
		AtLeader: func(_ context.Context, name string, _ proto.Message, local func() (proto.Message, error)) (proto.Message, error) {
			ran = append(ran, name)
			return local()
		}}
	s := New(opts)

	list, err := s.MemberList(ctx, &pb.MemberListRequest{})
	if err != nil || len(list.Members) != 1 || list.Header.MemberId != 7 || list.Header.Revision != 0 {
		t.Errorf("MemberList = %v, %v", list, err)
	}
	if _, err := s.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"not a url"}}); err != rpctypes.ErrGRPCMemberBadURLs {
		t.Errorf("add with bad peer URLs: %v, want %v", err, rpctypes.ErrGRPCMemberBadURLs)
	}
	add, err := s.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"http://10.0.0.2:2380"}, IsLearner: true})
	if err != nil || add.Member.ID != 11 || !add.Member.IsLearner || len(add.Members) != 2 {
		t.Fatalf("add: %v, %v", add, err)
	}
	if _, err := s.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 11, PeerURLs: []string{"::"}}); err != rpctypes.ErrGRPCMemberBadURLs {
		t.Errorf("update with bad peer URLs: %v, want %v", err, rpctypes.ErrGRPCMemberBadURLs)
	}
	if up, err := s.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 11, PeerURLs: []string{"http://10.0.0.3:2380"}}); err != nil ||
		up.Members[1].PeerURLs[0] != "http://10.0.0.3:2380" {
		t.Errorf("update: %v, %v", up, err)
	}
	if pr, err := s.MemberPromote(ctx, &pb.MemberPromoteRequest{ID: 11}); err != nil || pr.Members[1].IsLearner {
		t.Errorf("promote: %v, %v", pr, err)
	}
	if _, err := s.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: 8}); err != rpctypes.ErrGRPCMemberNotFound {
		t.Errorf("remove of an unknown id: %v, want %v", err, rpctypes.ErrGRPCMemberNotFound)
	}
	if rm, err := s.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: 11}); err != nil || len(rm.Members) != 1 {
		t.Errorf("remove: %v, %v", rm, err)
	}
	want := []string{"MemberAdd", "MemberUpdate", "MemberPromote", "MemberRemove", "MemberRemove"}
	if len(ran) != len(want) {
		t.Fatalf("ran at the leader %v, want %v", ran, want)
	}
	for i := range want {
		if ran[i] != want[i] {
			t.Fatalf("ran at the leader %v, want %v", ran, want)
		}
	}

	refused := errors.New("refused")
	ms.err = refused
	if _, err := s.MemberPromote(ctx, &pb.MemberPromoteRequest{ID: 7}); err != refused {
		t.Errorf("a refused promotion: %v, want the membership's error", err)
	}
	opts.Access = access{}
	s = New(opts)
	if _, err := s.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: 7}); err != rpctypes.ErrGRPCPermissionDenied {
		t.Errorf("remove by a caller without the root role: %v, want %v", err, rpctypes.ErrGRPCPermissionDenied)
	}
}
