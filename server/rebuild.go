package server

import (
	"fmt"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

// rebuildCore rebuilds the sequencer's core from the journal as applied: a
// member that led, lost that and leads again decided things that were not
// applied. It runs on the sequencer's goroutine while the apply goroutine
// waits for it (see sequencer.Activate), so the journal does not change
// meanwhile.
func (s *Server) rebuildCore() (*sequencer.Core, error) {
	st := mvcc.NewStore()
	st.SetLoader(s.loadPair)
	base := s.j.BaseRev()
	for kv, err := range s.j.Base() {
		if err != nil {
			return nil, err
		}
		st.Load(kv)
	}
	rev := max(1, base)
	st.SetRev(rev)
	for rec, err := range s.j.Records(rev+1, 0) {
		if err != nil {
			return nil, err
		}
		if rec.Revision != rev+1 {
			return nil, fmt.Errorf("%w: revision %d follows %d", journal.ErrCorrupt, rec.Revision, rev)
		}
		rev = rec.Revision
		st.Apply(rev, rec.Events)
	}
	if want := s.committed.Load(); rev != want {
		return nil, fmt.Errorf("server: rebuilding the sequencer: the journal ends at revision %d, applied %d", rev, want)
	}
	if c := s.compactRev.Load(); c > 0 {
		st.Compact(c)
	}
	leases := lease.NewIndex(0)
	if _, err := restoreLeases(s.j, st, leases); err != nil {
		return nil, err
	}
	s.log.Info("sequencer rebuilt from the journal", "revision", rev)
	return sequencer.NewCore(st, leases), nil
}
