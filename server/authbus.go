package server

import (
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"
)

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

// UserRecord is a fingerprint of a user's record (its password hash and
// roles), false if there is no such user: it changes when the user's
// password or roles do.
func (s *Server) UserRecord(name string) (string, bool) {
	u := s.auth.be.GetUser(name)
	if u == nil {
		return "", false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(u)
	if err != nil {
		return "", false
	}
	return string(b), true
}
