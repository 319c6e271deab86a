package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/server/alarm"
	"revd/server/authgate"
)

// openAlarms restores the durable alarms (see package alarm); their
// changes go through the sequencer, as every journal write, and a NOSPACE
// the quota raises goes to the leader, as a client's Alarm request.
func (s *Server) openAlarms() error {
	stored, err := s.j.Alarms()
	if err != nil {
		return err
	}
	s.alarms = alarm.New(stored, alarm.Options{
		MemberID:   s.meta.MemberID,
		QuotaBytes: s.opts.QuotaBackendBytes,
		Journal:    s.j,
		Store: func(list []journal.Alarm) error {
			return s.journalChange(&sequencer.Change{Alarms: list, SetAlarms: true})
		},
		RaiseNoSpace: func() {
			ctx, cancel := context.WithTimeout(authgate.AsServer(context.Background()), s.requestTimeout())
			defer cancel()
			_, _ = s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: s.meta.MemberID, Alarm: pb.AlarmType_NOSPACE})
		},
		Logger: s.log,
	})
	return nil
}

// Alarms lists the raised alarms.
func (s *Server) Alarms() []*pb.AlarmMember { return s.alarms.List() }

// Alarm answers Maintenance.Alarm as etcd's applier does: GET lists the
// alarms (of one type, or all for NONE); ACTIVATE raises one for the given
// member (any id, as etcd) and answers it, new or not; DEACTIVATE clears
// one and answers it if it was raised.
func (s *Server) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if r.Action == pb.AlarmRequest_GET {
		return s.alarm(ctx, r)
	}
	// The leader raises and clears them (it journals them): another
	// member forwards the request.
	return atLeader(s, ctx, "Alarm", r, func() (*pb.AlarmResponse, error) { return s.alarm(ctx, r) })
}

func (s *Server) alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	check := s.auth.RequireAdmin
	if r.Action == pb.AlarmRequest_GET {
		check = s.auth.RequireUser
	}
	if err := check(ctx); err != nil {
		return nil, err
	}
	resp := &pb.AlarmResponse{Header: s.Header()}
	switch r.Action {
	case pb.AlarmRequest_GET:
		for _, m := range s.alarms.List() {
			if r.Alarm == pb.AlarmType_NONE || m.Alarm == r.Alarm {
				resp.Alarms = append(resp.Alarms, m)
			}
		}
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		m, err := s.alarms.Raise(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	case pb.AlarmRequest_DEACTIVATE:
		m, err := s.alarms.Clear(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	}
	return resp, nil
}
