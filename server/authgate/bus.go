package authgate

import (
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"
)

// What the NATS bus's etcd users (bus.BusUsers: clients of the embedded
// NATS server log in as etcd's users, revd --nats-auth=etcd) ask of the
// auth store.

// CheckUser checks a user's password as Authenticate does, without
// issuing a token, and reports whether the user has the root role.
func (s *Service) CheckUser(name, password string) (root bool, err error) {
	g := s.g
	if g.mode.Load() == modeBroken {
		return false, errBroken
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
func (s *Service) UserRecord(name string) (string, bool) {
	u := s.g.be.GetUser(name)
	if u == nil {
		return "", false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(u)
	if err != nil {
		return "", false
	}
	return string(b), true
}
