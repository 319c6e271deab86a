package bus

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"regexp"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// BusUsers puts etcd's users on the embedded NATS server's bus
// (EmbeddedOptions.Users; revd --nats-auth=etcd). While etcd's
// authentication is on, a client connects as one of etcd's users, with that
// user's password, and may only publish revd's requests and subscribe to
// its own inboxes ("_INBOX_<user>.>": its client must use that inbox
// prefix) and, for users with the root role, to the commit feed. So no user
// reads another's replies and watch responses, the feed's every change, or
// the passwords other users send. While authentication is off, clients
// connect as anyone (or no one) and may do anything but serve revd's
// subjects and publish on the feed. revd's own connections are
// InternalUser and ServiceUser.
// Recheck closes the connections a change of the auth store no longer
// allows; their clients connect again and are checked again.
type BusUsers struct {
	// CheckPassword checks a user's password and reports whether the user
	// has the root role.
	CheckPassword func(user, password string) (root bool, err error)
	// On reports whether etcd's authentication is on.
	On func() bool
	// Record returns a fingerprint of a user's record (its password and
	// roles), false if there is no such user: a connection whose user's
	// fingerprint changes is closed at the next Recheck.
	Record func(user string) (string, bool)

	// Set by StartEmbedded.
	ns       *server.Server
	internal []byte // InternalUser's password
	prefix   string
	log      *slog.Logger

	mu    sync.Mutex
	own   map[uint64]bool    // revd's own connections, by client id
	users map[uint64]busConn // connections made as etcd users
}

type busConn struct{ user, record string }

// ErrBusUsersOptions refuses Users without InternalPassword, or with
// Username: the bus has etcd's users, or one of its own.
var ErrBusUsersOptions = errors.New("bus: embedded NATS server: etcd's users on the bus need InternalPassword, CheckPassword, On and Record, and exclude Username")

// InboxPrefix is the inbox prefix a client connecting as user must use
// (nats.CustomInboxPrefix) while etcd's users are on the bus.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// busUserName is the user names that can stand in a subject token; others
// cannot connect to the bus as themselves.
var busUserName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// userPermissions are an etcd user's on the bus: revd's requests
// (<prefix>.<service>.<call>, and a cluster member's own maintenance calls,
// <prefix>.maintenance.<call>.<member>), micro's discovery, and its own
// inboxes (and the feed, for root).
func userPermissions(prefix, user string, root bool) *server.Permissions {
	sub := []string{InboxPrefix(user) + ".>"}
	if root {
		sub = append(sub, feedSubjects(prefix)...)
	}
	return &server.Permissions{
		Publish:   publishNotOnFeed(prefix, prefix+".*.*", prefix+".maintenance.*.*", "$SRV.>"),
		Subscribe: &server.SubjectPermission{Allow: sub},
	}
}

// Check implements server.Authentication. Only a user name and password
// are taken: a client that presents an nkey, a JWT or a token is refused
// (nats-server would report those, not the user checked here).
func (u *BusUsers) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o.Nkey != "" || o.JWT != "" || o.Token != "" || o.Sig != "" {
		return false
	}
	if o.Username == InternalUser || o.Username == ServiceUser {
		if subtle.ConstantTimeCompare([]byte(o.Password), u.internal) != 1 {
			return false
		}
		u.mu.Lock()
		u.own[c.GetID()] = true
		u.mu.Unlock()
		var perms *server.Permissions
		if o.Username == ServiceUser {
			perms = servicePermissions(u.prefix)
		}
		c.RegisterUser(&server.User{Username: o.Username, Permissions: perms})
		return true
	}
	if !u.On() {
		c.RegisterUser(&server.User{Username: o.Username, Permissions: clientPermissions(u.prefix)})
		return true
	}
	if !busUserName.MatchString(o.Username) {
		u.log.Warn("nats: refused a client: etcd's authentication is on, and it did not connect as one of etcd's users whose name can stand in a subject ([A-Za-z0-9_-])",
			"user", o.Username, "remote", c.RemoteAddress())
		return false
	}
	// The record first: if the user changes while the password is
	// checked, the record kept is the old one, and the Recheck that follows
	// the change closes the connection.
	record, ok := u.Record(o.Username)
	if !ok {
		return false
	}
	root, err := u.CheckPassword(o.Username, o.Password)
	if err != nil {
		u.log.Info("nats: refused a client", "user", o.Username, "remote", c.RemoteAddress(), "err", err)
		return false
	}
	u.mu.Lock()
	u.users[c.GetID()] = busConn{user: o.Username, record: record}
	u.mu.Unlock()
	c.RegisterUser(&server.User{Username: o.Username, Permissions: userPermissions(u.prefix, o.Username, root)})
	return true
}

// Recheck closes, after a change of the auth store, the client connections
// it no longer allows: every one but revd's own when authentication was
// turned on or off (switched); otherwise those whose user was deleted or
// had its password or roles changed, and any made without a user while
// authentication is on.
// A nil BusUsers has nothing to check.
func (u *BusUsers) Recheck(switched bool) {
	if u == nil || u.ns == nil {
		return
	}
	cz, err := u.ns.Connz(&server.ConnzOptions{Limit: 1 << 30})
	if err != nil {
		return
	}
	on := u.On()
	u.mu.Lock()
	defer u.mu.Unlock()
	live := make(map[uint64]bool, len(cz.Conns))
	for _, ci := range cz.Conns {
		live[ci.Cid] = true
		if u.own[ci.Cid] {
			continue
		}
		bc, isUser := u.users[ci.Cid]
		keep := !switched && (isUser || !on)
		if keep && isUser {
			record, ok := u.Record(bc.user)
			keep = ok && record == bc.record
		}
		if !keep {
			u.ns.DisconnectClientByID(ci.Cid)
			delete(u.users, ci.Cid)
		}
	}
	for cid := range u.own {
		if !live[cid] {
			delete(u.own, cid)
		}
	}
	for cid := range u.users {
		if !live[cid] {
			delete(u.users, cid)
		}
	}
}
