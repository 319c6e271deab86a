package server

import (
	"context"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/server/authgate"
)

// Damage the journal finds while the server runs (a table block or a
// record failing its checksum when read, by a client's read, a watcher's
// catch-up or Pebble's background work) fails the read that found it and
// raises etcd's CORRUPT alarm for this member, as a client's ACTIVATE
// would (through the leader, into the log): durable, listed by
// Maintenance.Alarm, refusing every write with "etcdserver: corrupt
// cluster" until an operator disarms it. Damage found while the server
// starts stops it instead (journal.Open, restore).

// corruptionSink hands the journal's OnCorrupt reports to the server once
// New has built it; reports before then (a restore that fails) are not
// alarms: New fails.
type corruptionSink struct{ s atomic.Pointer[Server] }

func (c *corruptionSink) report(err error) {
	if s := c.s.Load(); s != nil {
		s.corruptionFound(err)
	}
}

func (s *Server) corruptionFound(err error) {
	s.log.Error("damaged data in the data directory: raising the CORRUPT alarm; writes are refused until it is disarmed",
		"err", err)
	ctx, cancel := context.WithTimeout(authgate.AsServer(context.Background()), s.requestTimeout())
	defer cancel()
	_, aerr := s.maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: s.meta.MemberID,
		Alarm: pb.AlarmType_CORRUPT})
	if aerr != nil {
		s.log.Error("the CORRUPT alarm could not be raised", "err", aerr)
	}
}
