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
			_, _ = s.maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: s.meta.MemberID, Alarm: pb.AlarmType_NOSPACE})
		},
		Logger: s.log,
	})
	return nil
}

// Alarms lists the raised alarms.
func (s *Server) Alarms() []*pb.AlarmMember { return s.alarms.List() }
