package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"
)

// ListenOff is the EmbeddedOptions.Listen value that starts the embedded
// server without a TCP listener; clients connect in-process with
// nats.InProcessServer.
const ListenOff = "off"

// Defaults for EmbeddedOptions.
const (
	DefaultListen       = "127.0.0.1:4222"
	DefaultMaxPayload   = 8 << 20 // 8 MiB; nats-server warns above this
	DefaultReadyTimeout = 10 * time.Second
)

// EmbeddedOptions configures StartEmbedded. The zero value starts a server
// on 127.0.0.1:4222 that logs nothing.
type EmbeddedOptions struct {
	// Listen is "host:port" for client connections, or ListenOff ("off")
	// for no TCP listener. Port 0 picks a free port (see
	// (*server.Server).ClientURL). Default DefaultListen.
	Listen string

	// Logger receives the server's log lines (notice -> Info, warning ->
	// Warn, error and fatal -> Error, debug -> Debug when the logger has
	// Debug enabled). Nil: the server logs nothing.
	Logger *slog.Logger

	// MaxPayload is the largest message the server accepts, in bytes; it
	// bounds both requests and replies. Default DefaultMaxPayload.
	MaxPayload int32

	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// Username and Password, if set (both), are the credentials every
	// client must present (nats://user:password@host:port, or
	// nats.UserInfo; in-process connections too): NATS's own
	// authorization, which the server refuses others with ("Authorization
	// Violation"). Default none: any client may connect.
	Username, Password string

	// InternalPassword, if set, keeps revd's own subjects for revd: the
	// server then has a user InternalUser with this password and every
	// permission, for revd's own connection, while clients (anonymous, or
	// Username's) may not publish on the commit feed ("<SubjectPrefix>.feed")
	// nor subscribe to revd's service subjects ("<SubjectPrefix>.*.*",
	// where requests and passwords travel, and "$SRV.>"), which the server
	// refuses them with a permissions violation. Without it every client
	// may do anything.
	InternalPassword string
	// SubjectPrefix is revd's subject prefix, for InternalPassword's
	// permissions. Default DefaultSubjectPrefix.
	SubjectPrefix string

	// Users, with InternalPassword and without Username, puts etcd's
	// users on the bus (see BusUsers).
	Users *BusUsers

	// Cluster, when its Listen is set, makes the server a member of a NATS
	// cluster (the revd cluster's members' embedded servers, see
	// ClusterOptions).
	Cluster ClusterOptions
}

// ClusterOptions join the embedded server to a NATS cluster: it listens for
// routes on Listen ("host:port") and connects to Routes
// ("nats-route://host:port", the other members'; a member it reaches tells
// it of the rest). Name is this server's name in the cluster, which must be
// unique (the revd member's name). With TLS, every route, accepted or
// dialed, is a TLS connection with that configuration (revd gives the
// members' peer TLS: their certificates, and the CA that verifies them);
// without, routes are neither authenticated nor encrypted, as the peer
// URLs' plain http.
type ClusterOptions struct {
	Listen string
	Routes []string
	Name   string
	TLS    *tls.Config
}

// The users of revd's own connections to the embedded server when
// EmbeddedOptions.InternalPassword is set (both with that password):
// InternalUser may do anything (revd publishes the commit feed with it);
// ServiceUser, the NATS API's, anything but publish on the feed, so that no
// client can have the service (micro's discovery handlers answer any reply
// subject) publish there.
const (
	InternalUser = "_revd_internal"
	ServiceUser  = "_revd_service"
)

// anonymousUser is the user clients that present no credentials are
// mapped to when EmbeddedOptions.InternalPassword is set and Username is
// not (nats-server's no_auth_user).
const anonymousUser = "_revd_client"

// ErrInternalUserName refuses EmbeddedOptions.Username InternalUser or
// ServiceUser.
var ErrInternalUserName = errors.New("bus: embedded NATS server: " + InternalUser + " and " + ServiceUser + " are revd's own user names")

// publishNotOnFeed allows publishing on allow's subjects, never on the
// commit feed: only InternalUser publishes there.
func publishNotOnFeed(prefix string, allow ...string) *server.SubjectPermission {
	return &server.SubjectPermission{Allow: allow, Deny: feedSubjects(prefix)}
}

// servicePermissions are ServiceUser's.
func servicePermissions(prefix string) *server.Permissions {
	return &server.Permissions{Publish: publishNotOnFeed(prefix, ">")}
}

// clientPermissions are the permissions of clients when revd's own
// subjects are kept (EmbeddedOptions.InternalPassword).
func clientPermissions(prefix string) *server.Permissions {
	return &server.Permissions{
		Publish:   publishNotOnFeed(prefix, ">"),
		Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{prefix + ".*.*", "$SRV.>"}},
	}
}

// bcryptHash hashes a password for the server's user list: the server takes
// a bcrypt hash (and warns about a plain password); the cost is paid at
// every connection, and the hash only ever lives in this process's memory,
// as the password does.
func bcryptHash(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return "", fmt.Errorf("bus: embedded NATS server: %w", err)
	}
	return string(h), nil
}

// ErrEmbeddedNotReady is returned (wrapped) by StartEmbedded when the server
// does not become ready within EmbeddedOptions.ReadyTimeout.
var ErrEmbeddedNotReady = errors.New("bus: embedded NATS server not ready")

// StartEmbedded starts a NATS server in this process and waits until it
// accepts connections. It fails with a clear error, without waiting for
// ReadyTimeout, when the listen address cannot be bound (for example the
// port is taken). The caller stops the server with Shutdown (and may wait
// with WaitForShutdown).
func StartEmbedded(opts EmbeddedOptions) (*server.Server, error) {
	if (opts.Username == "") != (opts.Password == "") {
		return nil, errors.New("bus: embedded NATS server: a user name needs a password, and a password a user name")
	}
	sopts := &server.Options{
		ServerName: "revd",
		NoSigs:     true, // the revd process owns its signals
		MaxPayload: opts.MaxPayload,
	}
	if err := opts.authorize(sopts); err != nil {
		return nil, err
	}
	if err := opts.Cluster.apply(sopts); err != nil {
		return nil, err
	}
	if sopts.MaxPayload <= 0 {
		sopts.MaxPayload = DefaultMaxPayload
	}
	listen := opts.Listen
	if listen == "" {
		listen = DefaultListen
	}
	if listen == ListenOff {
		sopts.DontListen = true
	} else {
		host, portStr, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("bus: bad NATS listen address %q (want host:port or %q): %w", listen, ListenOff, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("bus: bad NATS listen port in %q", listen)
		}
		if port == 0 {
			port = server.RANDOM_PORT // in nats-server, 0 means the default port 4222
		}
		sopts.Host, sopts.Port = host, port
	}
	ready := opts.ReadyTimeout
	if ready <= 0 {
		ready = DefaultReadyTimeout
	}

	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded NATS server: %w", err)
	}
	if opts.Users != nil {
		opts.Users.ns = ns
	}
	lg := newServerLogger(opts.Logger)
	ns.SetLoggerV2(lg, lg.debug, false, false)
	ns.Start()

	// Poll for readiness until the deadline (this is process start-up), but
	// give up at once when the server reports a fatal error such as a
	// listen failure: nats-server itself would keep polling until the
	// timeout.
	deadline := time.Now().Add(ready)
	for {
		select {
		case ferr := <-lg.fatal:
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, fmt.Errorf("bus: embedded NATS server on %s: %s", listen, ferr)
		default:
		}
		if ns.ReadyForConnections(50 * time.Millisecond) {
			return ns, nil
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, fmt.Errorf("%w after %s (listen %s)", ErrEmbeddedNotReady, ready, listen)
		}
	}
}

// apply sets sopts' cluster options.
func (c ClusterOptions) apply(sopts *server.Options) error {
	if c.Listen == "" {
		return nil
	}
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("bus: bad NATS cluster listen address %q (want host:port): %w", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return fmt.Errorf("bus: bad NATS cluster listen port in %q", c.Listen)
	}
	sopts.Cluster = server.ClusterOpts{Name: "revd", Host: host, Port: port}
	if c.TLS != nil {
		sopts.Cluster.TLSConfig = c.TLS
		sopts.Cluster.TLSTimeout = 5 // seconds, for the handshake
	}
	if c.Name != "" {
		sopts.ServerName = c.Name
	}
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return fmt.Errorf("bus: bad NATS route %q (want nats-route://host:port)", r)
		}
		sopts.Routes = append(sopts.Routes, u)
	}
	return nil
}

// serverLogger adapts nats-server's Logger interface to slog and reports
// fatal errors on a channel, because nats-server reports a failed listen
// only through its logger.
type serverLogger struct {
	l     *slog.Logger
	debug bool
	fatal chan string
}

func newServerLogger(l *slog.Logger) *serverLogger {
	l = loggerOrDiscard(l)
	return &serverLogger{
		l:     l.With("component", "nats-server"),
		debug: l.Enabled(context.Background(), slog.LevelDebug),
		fatal: make(chan string, 1),
	}
}

func (s *serverLogger) log(level slog.Level, format string, v []any) {
	if s.l.Enabled(context.Background(), level) {
		s.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (s *serverLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s *serverLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s *serverLogger) Errorf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s *serverLogger) Debugf(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
func (s *serverLogger) Tracef(format string, v ...any)  { s.log(slog.LevelDebug-4, format, v) }

// Fatalf logs at Error level and reports the message to StartEmbedded. It
// does not exit the process (nats-server's own logger would).
func (s *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg, "fatal", true)
	select {
	case s.fatal <- msg:
	default:
	}
}

// authorize sets sopts' users and their permissions from opts.
func (opts EmbeddedOptions) authorize(sopts *server.Options) error {
	if u := opts.Users; u != nil {
		if opts.InternalPassword == "" || opts.Username != "" || u.CheckPassword == nil || u.On == nil || u.Record == nil {
			return ErrBusUsersOptions
		}
		u.internal, u.prefix, u.log = []byte(opts.InternalPassword), opts.prefix(), loggerOrDiscard(opts.Logger)
		u.own, u.users = map[uint64]bool{}, map[uint64]busConn{}
		sopts.CustomClientAuthentication = u
		return nil
	}
	var password string
	if opts.Password != "" {
		h, err := bcryptHash(opts.Password)
		if err != nil {
			return err
		}
		password = h
	}
	if opts.InternalPassword == "" {
		sopts.Username, sopts.Password = opts.Username, password
		return nil
	}
	if opts.Username == InternalUser || opts.Username == ServiceUser {
		return ErrInternalUserName
	}
	prefix := opts.prefix()
	internal, err := bcryptHash(opts.InternalPassword)
	if err != nil {
		return err
	}
	client := &server.User{Username: opts.Username, Password: password, Permissions: clientPermissions(prefix)}
	if opts.Username == "" {
		client.Username = anonymousUser
		sopts.NoAuthUser = anonymousUser
	}
	sopts.Users = []*server.User{{Username: InternalUser, Password: internal},
		{Username: ServiceUser, Password: internal, Permissions: servicePermissions(prefix)}, client}
	return nil
}

func (opts EmbeddedOptions) prefix() string {
	if opts.SubjectPrefix == "" {
		return DefaultSubjectPrefix
	}
	return opts.SubjectPrefix
}

func loggerOrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
