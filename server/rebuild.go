package server

import (
	"fmt"

	"revd/actors/sequencer"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

// rebuildCore rebuilds the sequencer's core as applied: a member that led,
// lost that and leads again decided things that were not applied. Its
// store is a new Overlay over the shards at the applied revision (which
// waits for the shards to apply it), its lease index is restored from the
// journal. It runs on the sequencer's goroutine while the apply goroutine
// waits for it (see sequencer.Activate), so the journal does not change
// meanwhile.
func (s *Server) rebuildCore() (*sequencer.Core, error) {
	leases := lease.NewIndex(0)
	r, err := restore(s.j, nil, leases)
	if err != nil {
		return nil, err
	}
	if want := s.committed.Load(); r.rev != want {
		return nil, fmt.Errorf("server: rebuilding the sequencer: the journal ends at revision %d, applied %d", r.rev, want)
	}
	s.log.Info("sequencer rebuilt from the journal", "revision", r.rev)
	return sequencer.NewCore(mvcc.NewOverlay(s.set, s.set.Values(), r.rev, r.compactRev), leases), nil
}
