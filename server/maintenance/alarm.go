package maintenance

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Alarm answers Maintenance.Alarm as etcd's applier does: GET lists the
// alarms (of one type, or all for NONE); ACTIVATE raises one for the given
// member (any id, as etcd) and answers it, new or not; DEACTIVATE clears
// one and answers it if it was raised. See package alarm. The leader
// raises and clears them (it journals them), and answers GET too: another
// member forwards every action (Options.AtLeader), as etcd sends every
// one through raft, so that a member cut off from its cluster does not
// list alarms that may be stale, and fails as etcd's does.
func (s *Service) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp, err := s.opts.AtLeader(ctx, "Alarm", r, func() (proto.Message, error) { return s.alarm(ctx, r) })
	if err != nil {
		return nil, err
	}
	return resp.(*pb.AlarmResponse), nil
}

func (s *Service) alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	check := s.opts.Access.RequireAdmin
	if r.Action == pb.AlarmRequest_GET {
		check = s.opts.Access.RequireUser
	}
	if err := check(ctx); err != nil {
		return nil, err
	}
	alarms := s.opts.Alarms
	resp := &pb.AlarmResponse{Header: s.opts.Store.Header()}
	switch r.Action {
	case pb.AlarmRequest_GET:
		for _, m := range alarms.List() {
			if r.Alarm == pb.AlarmType_NONE || m.Alarm == r.Alarm {
				resp.Alarms = append(resp.Alarms, m)
			}
		}
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		m, err := alarms.Raise(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	case pb.AlarmRequest_DEACTIVATE:
		m, err := alarms.Clear(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	}
	return resp, nil
}
