package server

import (
	"fmt"

	"revd/actors/sequencer"
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
	st.SetLoader(s.reads.loadPair)
	if _, err := restore(s.j, st, nil); err != nil {
		return nil, err
	}
	if rev, want := st.Rev(), s.committed.Load(); rev != want {
		return nil, fmt.Errorf("server: rebuilding the sequencer: the journal ends at revision %d, applied %d", rev, want)
	}
	leases := lease.NewIndex(0)
	if _, err := restoreLeases(s.j, st, leases); err != nil {
		return nil, err
	}
	s.log.Info("sequencer rebuilt from the journal", "revision", st.Rev())
	return sequencer.NewCore(st, leases), nil
}
