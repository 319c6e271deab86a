package server

import (
	"revd/journal"
)

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
