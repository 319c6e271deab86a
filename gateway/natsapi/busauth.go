package natsapi

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"regexp"

	"github.com/nats-io/nats-server/v2/server"
)

// etcd's users on the bus (EmbeddedOptions.CheckUser): while etcd's
// authentication is on, a client of the embedded NATS server connects as
// one of etcd's users, with that user's password, and may only publish
// revd's requests and subscribe to its own inboxes ("_INBOX_<user>.>": its
// client must use that inbox prefix) and, for users with the root role, to
// the commit feed. So no user reads another's replies and watch responses,
// the feed's every change, or the passwords other users send. While
// authentication is off, clients connect as anyone (or no one) and may do
// anything but serve revd's subjects and publish on the feed. revd's own
// connection is InternalUser. DisconnectClients makes clients connect (and
// be checked) again after a change of users, roles or the auth switch.

// ErrCheckUserOptions refuses CheckUser without InternalPassword, or with
// Username: the bus has etcd's users, or one of its own.
var ErrCheckUserOptions = errors.New("natsapi: embedded NATS server: etcd's users on the bus need InternalPassword, and exclude Username")

// InboxPrefix is the inbox prefix a client connecting as user must use
// (nats.CustomInboxPrefix) while etcd's users are on the bus.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// busUserName is the user names that can stand in a subject token; others
// cannot connect to the bus as themselves.
var busUserName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// userPermissions are an etcd user's on the bus.
func userPermissions(prefix, user string, root bool) *server.Permissions {
	sub := []string{InboxPrefix(user) + ".>"}
	if root {
		sub = append(sub, Subject(prefix, FeedEndpoint))
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{prefix + ".*.*", "$SRV.>"}, Deny: []string{Subject(prefix, FeedEndpoint)}},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}
}

// etcdUsers is the embedded server's client authentication with etcd's
// users.
type etcdUsers struct {
	internal []byte // InternalUser's password
	prefix   string
	check    func(user, password string) (root bool, err error)
	authOn   func() bool
	log      *slog.Logger
}

// Check implements server.Authentication.
func (a *etcdUsers) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o.Username == InternalUser {
		if subtle.ConstantTimeCompare([]byte(o.Password), a.internal) != 1 {
			return false
		}
		c.RegisterUser(&server.User{Username: InternalUser})
		return true
	}
	if !a.authOn() {
		c.RegisterUser(&server.User{Username: o.Username, Permissions: clientPermissions(a.prefix)})
		return true
	}
	if !busUserName.MatchString(o.Username) {
		a.log.Warn("nats: refused a client: etcd's authentication is on, and it did not connect as one of etcd's users whose name can stand in a subject ([A-Za-z0-9_-])",
			"user", o.Username, "remote", c.RemoteAddress())
		return false
	}
	root, err := a.check(o.Username, o.Password)
	if err != nil {
		a.log.Info("nats: refused a client", "user", o.Username, "remote", c.RemoteAddress(), "err", err)
		return false
	}
	c.RegisterUser(&server.User{Username: o.Username, Permissions: userPermissions(a.prefix, o.Username, root)})
	return true
}

// DisconnectClients closes the connection of every client of ns but revd's
// own, so that each connects again (nats.go does by itself) and is checked
// against etcd's users as they are now.
func DisconnectClients(ns *server.Server) {
	cz, err := ns.Connz(&server.ConnzOptions{Username: true, Limit: 1 << 30})
	if err != nil {
		return
	}
	for _, ci := range cz.Conns {
		if ci.AuthorizedUser != InternalUser {
			ns.DisconnectClientByID(ci.Cid)
		}
	}
}
