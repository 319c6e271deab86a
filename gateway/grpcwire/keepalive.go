package grpcwire

import (
	"net"
	"time"

	"golang.org/x/net/http2"

	"revd/internal/netconn"
)

// Keepalive, as grpc-go's server keeps connections alive and as etcd
// configures it (--grpc-keepalive-interval, --grpc-keepalive-timeout,
// --grpc-keepalive-min-time):
//
//   - Liveness. A connection on which nothing has been read for
//     Options.KeepaliveTime gets a PING; if still nothing is read within
//     Options.KeepaliveTimeout, the client is taken for gone and the
//     connection closed, with whatever streams it had (a watch whose client
//     vanished without a FIN stops holding a watcher). The socket's
//     TCP_USER_TIMEOUT is KeepaliveTimeout too: written data unacknowledged
//     that long ends the connection.
//   - Enforcement. A client's PING that comes less than
//     Options.KeepaliveMinTime after its previous one (two hours when it has
//     no stream open, unless KeepalivePermitWithoutStream) is a strike,
//     unless the server has sent headers or data since that previous PING;
//     past two strikes the server answers it, sends GOAWAY
//     ENHANCE_YOUR_CALM "too_many_pings" and closes the connection. grpc-go's
//     clients double their keepalive interval when told so. Pings that
//     clients send because data arrived (grpc-go's BDP estimator) follow
//     the server's writes and are never strikes.
//
// Anything read counts as activity (any frame, a PING ACK included); the
// time is taken once per read from the socket, not per frame.

// Keepalive defaults: grpc-go's, which etcd keeps unless its flags say
// otherwise.
const (
	// DefaultKeepaliveTime is how long a connection stays silent before
	// the server pings it.
	DefaultKeepaliveTime = 2 * time.Hour
	// DefaultKeepaliveTimeout is how long the server waits for anything
	// after its ping before it closes the connection.
	DefaultKeepaliveTimeout = 20 * time.Second
	// DefaultKeepaliveMinTime is the shortest interval a client may ping
	// at (etcd sets 5s with --grpc-keepalive-min-time).
	DefaultKeepaliveMinTime = 5 * time.Minute
	// minKeepaliveTime is grpc-go's floor on KeepaliveTime.
	minKeepaliveTime = time.Second
	// maxPingStrikes is how many early pings are forgiven.
	maxPingStrikes = 2
	// pingWithoutStream is the interval a client with no open stream must
	// keep between pings unless KeepalivePermitWithoutStream.
	pingWithoutStream = 2 * time.Hour
)

// epoch is the origin of mono.
var epoch = time.Now()

// mono is a monotonic clock reading in nanoseconds.
func mono() int64 { return int64(time.Since(epoch)) }

// keepaliveDefaults fills in the keepalive defaults.
func (o *Options) keepaliveDefaults() {
	if o.KeepaliveTime <= 0 {
		o.KeepaliveTime = DefaultKeepaliveTime
	}
	o.KeepaliveTime = max(o.KeepaliveTime, minKeepaliveTime)
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if o.KeepaliveMinTime <= 0 {
		o.KeepaliveMinTime = DefaultKeepaliveMinTime
	}
}

// pinger is a connection's liveness check, run by a timer (one run at a
// time: each run arms the next). It follows grpc-go's keepalive loop.
type pinger struct {
	c           *conn
	timer       *time.Timer
	prev        int64 // c.lastRead when the timer was last armed
	outstanding bool  // a ping was sent and nothing read since
	timeoutLeft time.Duration
}

func (c *conn) startKeepalive() {
	p := &pinger{c: c, prev: mono()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	p.timer = time.AfterFunc(c.srv.opts.KeepaliveTime, p.run)
	c.pinger = p
}

func (p *pinger) run() {
	c, o := p.c, &p.c.srv.opts
	c.mu.Lock() // also orders this run after startKeepalive's p.timer
	if c.closed {
		c.mu.Unlock()
		return
	}
	if last := c.lastRead.Load(); last > p.prev {
		c.mu.Unlock()
		// Read activity since the timer was armed: check again one
		// KeepaliveTime after it.
		p.outstanding = false
		p.prev = last
		p.timer.Reset(time.Duration(last) + o.KeepaliveTime - time.Duration(mono()))
		return
	}
	if p.outstanding && p.timeoutLeft <= 0 {
		c.mu.Unlock()
		o.Logger.Debug("grpcwire: keepalive ping not answered", "remote", c.nc.RemoteAddr(), "timeout", o.KeepaliveTimeout)
		c.close()
		return
	}
	if !p.outstanding {
		c.fw.WritePing(false, [8]byte{})
		c.kickLocked()
		p.timeoutLeft = o.KeepaliveTimeout
		p.outstanding = true
	}
	c.mu.Unlock()
	sleep := min(o.KeepaliveTime, p.timeoutLeft)
	p.timeoutLeft -= sleep
	p.timer.Reset(sleep)
}

// stop ends the checks (the connection closes).
func (p *pinger) stop() {
	if p != nil {
		p.timer.Stop()
	}
}

// onPing answers a client's PING and applies the enforcement policy; it
// reports false when the connection must close (too many pings).
func (c *conn) onPing(f *http2.PingFrame) bool {
	now := mono()
	o := &c.srv.opts
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fw.WritePing(true, f.Data)
	c.kickLocked()
	pinged, last := c.pinged, c.lastPingAt
	c.pinged, c.lastPingAt = true, now
	if c.wroteSincePing {
		c.wroteSincePing = false
		c.pingStrikes = 0
		return true
	}
	minGap := o.KeepaliveMinTime
	if len(c.streams) == 0 && !o.KeepalivePermitWithoutStream {
		minGap = pingWithoutStream
	}
	if pinged && time.Duration(now-last) < minGap {
		c.pingStrikes++
	}
	if c.pingStrikes <= maxPingStrikes {
		return true
	}
	c.fw.WriteGoAway(c.maxID, http2.ErrCodeEnhanceYourCalm, []byte("too_many_pings"))
	c.srv.opts.Logger.Debug("grpcwire: too many pings", "remote", c.nc.RemoteAddr())
	return false
}

// setUserTimeout sets TCP_USER_TIMEOUT on the TCP connection under nc
// (through TLS and other wrappers that expose NetConn), as grpc-go does
// with its keepalive timeout. Errors are ignored: a connection that is not
// TCP (a test's pipe, a Unix socket) has none.
func setUserTimeout(nc net.Conn, d time.Duration) {
	if tc, ok := netconn.Under[*net.TCPConn](nc); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			setUserTimeoutRaw(rc, d)
		}
	}
}

// activityReader reads the connection for the reader goroutine, noting the
// time of each read for the keepalive checks.
type activityReader struct{ c *conn }

func (r activityReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	r.c.lastRead.Store(mono())
	return n, err
}
