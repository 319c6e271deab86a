package server

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/projections/lease"
	raftv1 "revd/protos/revd/raft/v1"
)

// encodeEntry encodes a batch the sequencer decided as the data of one
// raft log entry (revd.raft.v1.Entry): the journal's own record values, so
// that every member stores the bytes the leader encoded.
// It returns the entry's data and the records' values.
func encodeEntry(proposer, proposal uint64, b *sequencer.Batch) ([]byte, [][]byte, error) {
	e := &raftv1.Entry{
		Proposer: proposer, Proposal: proposal,
		Records:         make([]*raftv1.Record, len(b.Records)),
		Compact:         b.Compact,
		CompactRevision: b.CompactRev,
		SetAlarms:       b.SetAlarms,
	}
	// The records' values share one buffer, and the records one array:
	// a few allocations a batch rather than a few a record.
	values := make([][]byte, len(b.Records))
	ends := make([]int, len(b.Records))
	buf := make([]byte, 0, recordsSizeHint(b.Records))
	for i, r := range b.Records {
		var err error
		if buf, err = journal.EncodeRecord(buf, r.Revision, r.Events); err != nil {
			return nil, nil, err
		}
		ends[i] = len(buf)
	}
	recs := make([]raftv1.Record, len(b.Records))
	start := 0
	for i, end := range ends {
		v := buf[start:end:end]
		recs[i].Revision, recs[i].Value = b.Records[i].Revision, v
		e.Records[i] = &recs[i]
		values[i] = v
		start = end
	}
	for _, c := range b.Leases {
		e.Leases = append(e.Leases, &raftv1.LeaseChange{Id: c.ID, Ttl: c.TTL, Revoked: c.Revoked, Revision: c.Rev, Seq: c.Seq})
	}
	for _, c := range b.Auth {
		e.Auth = append(e.Auth, authChangeToProto(c))
	}
	for _, a := range b.Alarms {
		e.Alarms = append(e.Alarms, &raftv1.Alarm{MemberId: a.MemberID, Type: a.Type})
	}
	data, err := proto.Marshal(e)
	return data, values, err
}

// recordsSizeHint is about the size of recs' encoded values, rather more
// than less: what encodeEntry's buffer starts with, so that it is seldom
// grown (and copied) while the records are appended.
func recordsSizeHint(recs []journal.Record) int {
	n := 0
	for _, r := range recs {
		n += 16 // checksum, revision
		for _, ev := range r.Events {
			n += 48 // tags, lengths, the event's type and the pair's revisions, version and lease
			if kv := ev.Kv; kv != nil {
				n += len(kv.Key) + len(kv.Value)
			}
		}
	}
	return n
}

// decodeEntry decodes an entry's data into the batch it carries and the
// records' journal values, which alias data (see splitEntry); the entry's
// Records are left empty.
func decodeEntry(data []byte) (*raftv1.Entry, *sequencer.Batch, [][]byte, error) {
	e, recs, err := splitEntry(data)
	if err != nil {
		return nil, nil, nil, err
	}
	b := &sequencer.Batch{
		Records:    make([]journal.Record, len(recs)),
		Compact:    e.Compact,
		CompactRev: e.CompactRevision,
		SetAlarms:  e.SetAlarms,
	}
	values := make([][]byte, len(recs))
	for i, r := range recs {
		rec, err := journal.DecodeRecord(r.rev, r.value)
		if err != nil {
			return nil, nil, nil, err
		}
		b.Records[i], values[i] = rec, r.value
	}
	for _, c := range e.Leases {
		b.Leases = append(b.Leases, lease.Change{Lease: lease.Lease{ID: c.Id, TTL: c.Ttl, Seq: c.Seq},
			Revoked: c.Revoked, Rev: c.Revision})
	}
	for _, c := range e.Auth {
		ac, err := authChangeFromProto(c)
		if err != nil {
			return nil, nil, nil, err
		}
		b.Auth = append(b.Auth, ac)
	}
	for _, a := range e.Alarms {
		b.Alarms = append(b.Alarms, journal.Alarm{MemberID: a.MemberId, Type: a.Type})
	}
	return e, b, values, nil
}

// requests is how many requests a batch carries, for raftnode's counts:
// its revisions and its other changes, at least 1.
func requests(b *sequencer.Batch) uint64 {
	n := len(b.Records) + len(b.Leases) + len(b.Auth)
	if b.Compact {
		n++
	}
	if b.SetAlarms {
		n++
	}
	return uint64(max(n, 1))
}

func authChangeToProto(c journal.AuthChange) *raftv1.AuthChange {
	switch {
	case c.Enabled != nil:
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_Enabled{Enabled: *c.Enabled}}
	case c.Revision != nil:
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_Revision{Revision: *c.Revision}}
	case c.PutUser != nil:
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_PutUser{PutUser: c.PutUser}}
	case c.DeleteUser != "":
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_DeleteUser{DeleteUser: c.DeleteUser}}
	case c.PutRole != nil:
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_PutRole{PutRole: c.PutRole}}
	default:
		return &raftv1.AuthChange{Change: &raftv1.AuthChange_DeleteRole{DeleteRole: c.DeleteRole}}
	}
}

func authChangeFromProto(c *raftv1.AuthChange) (journal.AuthChange, error) {
	switch x := c.Change.(type) {
	case *raftv1.AuthChange_Enabled:
		return journal.AuthChange{Enabled: &x.Enabled}, nil
	case *raftv1.AuthChange_Revision:
		return journal.AuthChange{Revision: &x.Revision}, nil
	case *raftv1.AuthChange_PutUser:
		return journal.AuthChange{PutUser: x.PutUser}, nil
	case *raftv1.AuthChange_DeleteUser:
		return journal.AuthChange{DeleteUser: x.DeleteUser}, nil
	case *raftv1.AuthChange_PutRole:
		return journal.AuthChange{PutRole: x.PutRole}, nil
	case *raftv1.AuthChange_DeleteRole:
		return journal.AuthChange{DeleteRole: x.DeleteRole}, nil
	}
	return journal.AuthChange{}, fmt.Errorf("server: bad log entry: an empty auth change")
}
