package server

import (
	"revd/journal"
)

// follow applies auth changes another leader decided (on the apply
// goroutine), holding the gate as a change does: etcd's store then reads
// its state back (Recover), as an etcd member does after applying a
// snapshot.
func (s *Server) followAuth(changes []journal.AuthChange) {
	g := s.auth
	g.mu.Lock()
	before := g.mode.Load()
	g.be.apply(changes)
	g.store.Recover(g.be)
	g.setMode()
	after := g.mode.Load()
	g.mu.Unlock()
	if s.opts.OnAuthChange != nil {
		s.opts.OnAuthChange(before != after)
	}
}

// reloadAuth puts the auth store back to what the journal holds, after a
// change was lost to a leader change; the gate's lock is held.
func (s *Server) reloadAuth() error {
	st, err := s.j.Auth()
	if err != nil {
		return err
	}
	g := s.auth
	g.be.reset(st)
	g.store.Recover(g.be)
	return nil
}

// followAlarms replaces the alarms with the list another leader journaled.
func (s *Server) followAlarms(list []journal.Alarm) {
	a := &s.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = a.list[:0:0]
	for _, m := range list {
		a.list = append(a.list, alarmMember(m))
	}
	a.mirror()
}
