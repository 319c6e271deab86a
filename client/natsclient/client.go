// Package natsclient is a Go client for revd's NATS front door (package
// revd/gateway/natsapi). Its methods take and return the etcd messages of
// go.etcd.io/etcd/api/v3/etcdserverpb, like the KV and Maintenance gRPC
// clients, and its errors compare equal to the values etcd's clientv3
// returns: a server-side "key is not provided" is rpctypes.ErrEmptyKey, a
// read below the compaction is rpctypes.ErrCompacted, and so on.
//
// Errors:
//   - an error reply from revd: rpctypes.Error(status.Error(code, message)),
//     i.e. an rpctypes.EtcdError for every message etcd's client knows and a
//     gRPC status error otherwise (use status.Code to read its code);
//   - nobody serving the subject: an error matching ErrNoServer and
//     nats.ErrNoResponders, reading "natsclient: no revd server is serving
//     <subject>";
//   - the context or Options.Timeout expiring: an error wrapping
//     context.DeadlineExceeded (or context.Canceled);
//   - other NATS failures (closed connection, message larger than
//     max_payload, ...): the nats.go error, wrapped with the subject;
//   - a reply that does not decode: ErrBadReply, wrapped.
//
// Authentication: a client made with Options.Token, or by WithToken, sends
// its token in the Revd-Token header of every request (KV, lease,
// maintenance, auth, and a watch's create, cancel, progress and keep-alive
// requests), as etcd's clients send theirs in gRPC metadata. Authenticate
// answers a token for a user name and password (see auth.go).
package natsclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// DefaultSubjectPrefix and the endpoint names are those of package natsapi
// (repeated here so that clients do not link the NATS server).
const (
	DefaultSubjectPrefix = "revd"
	DefaultTimeout       = 5 * time.Second

	endpointRange       = "kv.range"
	endpointPut         = "kv.put"
	endpointDeleteRange = "kv.delete_range"
	endpointTxn         = "kv.txn"
	endpointCompact     = "kv.compact"
	endpointStatus      = "maintenance.status"
)

// Options configures New. The zero value uses the defaults.
type Options struct {
	// SubjectPrefix must match the server's natsapi.Options.SubjectPrefix.
	// Default DefaultSubjectPrefix ("revd").
	SubjectPrefix string

	// Timeout bounds each call, in addition to the caller's context.
	// Default DefaultTimeout.
	Timeout time.Duration

	// Token, if set, is sent with every request (see WithToken). Default
	// none: requests carry no token, as with authentication off.
	Token string

	// Username and Password, if both set, make the client log in as
	// etcd's clientv3 does with the same fields: it authenticates before
	// its first request and sends the token it gets, and when revd
	// answers that the token is no longer good (see credentials.go) it
	// authenticates again and sends the request once more. With them,
	// Token is ignored.
	Username, Password string
}

// ErrNoServer matches (errors.Is) the error returned when no revd server
// subscribes to the request's subject.
var ErrNoServer = errors.New("natsclient: no revd server")

// ErrBadReply matches the error returned when a reply cannot be decoded.
var ErrBadReply = errors.New("natsclient: bad reply")

// Client calls revd over a NATS connection. It is safe for concurrent use;
// it does not own the connection.
type Client struct {
	nc      *nats.Conn
	prefix  string
	timeout time.Duration
	token   string // sent in headerToken when set and creds is nil
	creds   *credentials
}

// New returns a client that sends requests over nc.
func New(nc *nats.Conn, opts Options) *Client {
	if opts.SubjectPrefix == "" {
		opts.SubjectPrefix = DefaultSubjectPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Client{nc: nc, prefix: opts.SubjectPrefix, timeout: opts.Timeout, token: opts.Token}
	if opts.Username != "" && opts.Password != "" {
		c.creds = &credentials{user: opts.Username, password: opts.Password}
	}
	return c
}

// WithToken returns a copy of c that sends token with every request ("":
// none), over the same connection; c itself is unchanged. A Watch started
// on the copy sends the token with each of its requests, including the
// creates that resume it.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token, cp.creds = token, nil
	return &cp
}

// Range gets the keys in a range (KV.Range).
func (c *Client) Range(ctx context.Context, req *pb.RangeRequest) (*pb.RangeResponse, error) {
	return do[pb.RangeResponse](ctx, c, endpointRange, req)
}

// Put puts a key (KV.Put).
func (c *Client) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	return do[pb.PutResponse](ctx, c, endpointPut, req)
}

// DeleteRange deletes the keys in a range (KV.DeleteRange).
func (c *Client) DeleteRange(ctx context.Context, req *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return do[pb.DeleteRangeResponse](ctx, c, endpointDeleteRange, req)
}

// Txn runs a transaction (KV.Txn).
func (c *Client) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	return do[pb.TxnResponse](ctx, c, endpointTxn, req)
}

// Compact compacts the key-value history (KV.Compact).
func (c *Client) Compact(ctx context.Context, req *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return do[pb.CompactionResponse](ctx, c, endpointCompact, req)
}

// Status reports the server's status (Maintenance.Status).
func (c *Client) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	return do[pb.StatusResponse](ctx, c, endpointStatus, req)
}

func (c *Client) subject(endpoint string) string { return c.prefix + "." + endpoint }

func do[Resp any, PResp interface {
	*Resp
	proto.Message
}](ctx context.Context, c *Client, endpoint string, req proto.Message) (PResp, error) {
	msg, err := encodeRequest(c.subject(endpoint), req)
	if err != nil {
		return nil, err
	}
	reply, err := c.request(ctx, msg)
	if err != nil {
		return nil, err
	}
	resp := PResp(new(Resp))
	if err := decodeReply(msg.Subject, reply, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// encodeRequest makes the message of a request to subject.
func encodeRequest(subject string, req proto.Message) (*nats.Msg, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("natsclient: %s: encode request: %w", subject, err)
	}
	return &nats.Msg{Subject: subject, Data: data}, nil
}

// decodeReply decodes a reply from subject into resp.
func decodeReply(subject string, reply *nats.Msg, resp proto.Message) error {
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		return fmt.Errorf("%w from %s: %v", ErrBadReply, subject, err)
	}
	return nil
}

// request sends msg, with the client's token if it has one, and returns
// the reply, or the error it carries. Every request of the client goes
// through here. A client with credentials logs in first if it has no
// token yet, and sends msg again with a new token if revd refused the one
// it had (credentials.go).
func (c *Client) request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	if c.creds == nil {
		return c.send(ctx, msg, c.token)
	}
	token, err := c.creds.current(ctx, c)
	if err != nil {
		return nil, err
	}
	reply, err := c.send(ctx, msg, token)
	if c.creds.stale(err) {
		if token, err = c.creds.renew(ctx, c, token); err != nil {
			return nil, err
		}
		reply, err = c.send(ctx, msg, token)
	}
	return reply, err
}

// send sends msg with token ("" for none) and returns the reply, or the
// error it carries. Options.Timeout bounds each send (a login and the
// request it precedes, or a request sent again, have one each).
func (c *Client) send(ctx context.Context, msg *nats.Msg, token string) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if token != "" {
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header.Set(headerToken, token)
	} else if msg.Header != nil {
		msg.Header.Del(headerToken)
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, &noServerError{subject: msg.Subject}
		}
		return nil, fmt.Errorf("natsclient: %s: %w", msg.Subject, err)
	}
	if err := replyError(msg.Subject, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// replyError decodes a micro error reply into the error etcd's clientv3
// would return for the same gRPC status.
func replyError(subject string, msg *nats.Msg) error {
	if msg.Header == nil {
		return nil
	}
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	desc := msg.Header.Get(micro.ErrorHeader)
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return fmt.Errorf("%w from %s: error code %q is not a gRPC code (%s)", ErrBadReply, subject, code, desc)
	}
	return rpctypes.Error(status.Error(codes.Code(n), desc))
}

type noServerError struct{ subject string }

func (e *noServerError) Error() string {
	return "natsclient: no revd server is serving " + e.subject
}

func (e *noServerError) Is(target error) bool {
	return target == ErrNoServer || target == nats.ErrNoResponders
}
