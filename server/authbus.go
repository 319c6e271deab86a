package server

import "go.etcd.io/etcd/server/v3/auth"

// What the NATS front door's bus authentication (natsapi's etcd users on
// the embedded server, revd --nats-auth=etcd) asks of the auth store.

// CheckUser checks a user's password as Authenticate does, without
// issuing a token, and reports whether the user has the root role.
func (s *Server) CheckUser(name, password string) (root bool, err error) {
	g := s.auth
	if g.mode.Load() == authBroken {
		return false, errAuthBroken
	}
	rev, err := g.store.CheckPassword(name, password)
	if err != nil {
		return false, authError(err)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.store.IsAdminPermitted(&auth.AuthInfo{Username: name, Revision: rev}) == nil, nil
}

// AuthRevision is the auth store's revision: it moves at every change of
// users, roles or permissions, and when authentication is turned on or off.
func (s *Server) AuthRevision() uint64 { return s.auth.store.Revision() }
