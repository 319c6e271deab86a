package bus

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"revd/actors/watch"
	"revd/journal"
	feedv1 "revd/protos/revd/feed/v1"
)

// FeedEndpoint is the subject suffix of the commit feed: revd publishes
// every durable journal batch on "<prefix>.feed".
const FeedEndpoint = "feed"

// Headers of feed messages, so a subscriber can skip batches without
// decoding them.
const (
	HeaderFirstRevision = "Revd-First-Revision"
	HeaderLastRevision  = "Revd-Last-Revision"
	// HeaderFillTo marks a batch too large for one NATS message: the
	// message has no body, and subscribers read revisions up to this one
	// from the journal (revd's watch hub does).
	HeaderFillTo = "Revd-Fill-To"
	// HeaderCompactRevision carries the batch's compaction on such a
	// message.
	HeaderCompactRevision = "Revd-Compact-Revision"
	// HeaderMAC authenticates a message to the revd process that published
	// it: an HMAC-SHA256, under a key that process drew at start, of the
	// body and the fill headers. revd's own watch hub drops feed messages
	// without a valid one, so that a client of the bus cannot slip events
	// to watchers by publishing on the feed's subject. Other subscribers
	// cannot check it; they rely on the NATS server's permissions.
	HeaderMAC = "Revd-Feed-Mac"
)

// Feed is the commit feed over NATS core publish/subscribe: a watch.Feed
// whose Publish encodes each batch as a revd.feed.v1.Commit. Delivery is at
// most once (a slow subscriber may lose messages); subscribers detect gaps
// by revision and fill them from the journal, as the watch hub does.
type Feed struct {
	nc       *nats.Conn
	subject  string
	log      *slog.Logger
	interest func(subject string) bool
	key      []byte        // HeaderMAC's, drawn by NewFeed
	macs     sync.Pool     // of HMAC hashes under key
	forged   atomic.Uint64 // messages Subscribe dropped for a bad MAC
}

// NewFeed returns the feed on "<prefix>.feed" over nc.
func NewFeed(nc *nats.Conn, prefix string, log *slog.Logger) *Feed {
	return NewMemberFeed(nc, prefix, "", log)
}

// NewMemberFeed returns a member's feed over nc: on FeedSubject(prefix,
// member).
func NewMemberFeed(nc *nats.Conn, prefix, member string, log *slog.Logger) *Feed {
	if prefix == "" {
		prefix = DefaultSubjectPrefix
	}
	log = loggerOrDiscard(log)
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand panics rather)
	return &Feed{nc: nc, subject: FeedSubject(prefix, member), log: log, key: key}
}

// FeedSubject is the subject of a member's commit feed: "<prefix>.feed"
// when the NATS server is its own (member ""), "<prefix>.feed.<member>"
// when the members' servers form a NATS cluster, where every member
// publishes what it applied and its watch hub follows its own.
func FeedSubject(prefix, member string) string {
	if member == "" {
		return Subject(prefix, FeedEndpoint)
	}
	return Subject(prefix, FeedEndpoint) + "." + member
}

// feedSubjects are the subjects of every member's feed, for permissions.
func feedSubjects(prefix string) []string {
	return []string{Subject(prefix, FeedEndpoint), Subject(prefix, FeedEndpoint) + ".>"}
}

// mac is HeaderMAC's value for a message with this body and fill headers.
// The writer's goroutine (Publish) and the subscription's call it.
func (f *Feed) mac(data []byte, fillTo, compact string) string {
	h, _ := f.macs.Get().(hash.Hash)
	if h == nil {
		h = hmac.New(sha256.New, f.key)
	}
	defer f.macs.Put(h)
	h.Reset()
	h.Write(data)
	io.WriteString(h, "\x00"+fillTo+"\x00"+compact)
	var sum [sha256.Size]byte
	return base64.RawStdEncoding.EncodeToString(h.Sum(sum[:0]))
}

// authentic reports whether m carries the MAC of this process.
func (f *Feed) authentic(m *nats.Msg) bool {
	want := f.mac(m.Data, m.Header.Get(HeaderFillTo), m.Header.Get(HeaderCompactRevision))
	return hmac.Equal([]byte(m.Header.Get(HeaderMAC)), []byte(want))
}

// Forged is the number of feed messages Subscribe dropped because they did
// not come from this process.
func (f *Feed) Forged() uint64 { return f.forged.Load() }

// Subject is the feed's subject.
func (f *Feed) Subject() string { return f.subject }

// SkipWithoutInterest makes Publish ask interest(subject) first and drop a
// batch nobody subscribes to, without encoding it. With the embedded server,
// pass EmbeddedInterest(ns): revd's own watch hub subscribes only while it
// has watchers, so a store nobody watches publishes nothing.
func (f *Feed) SkipWithoutInterest(interest func(subject string) bool) *Feed {
	f.interest = interest
	return f
}

// EmbeddedInterest reports whether the embedded server ns has a
// subscription matching a subject (in its global account, the only one
// StartEmbedded configures).
func EmbeddedInterest(ns *server.Server) func(subject string) bool {
	return func(subject string) bool { return ns.GlobalAccount().SubscriptionInterest(subject) }
}

// Publish sends one durable batch. It never blocks on subscribers.
func (f *Feed) Publish(c *watch.Commit) {
	if f.interest != nil && !f.interest(f.subject) {
		return
	}
	data, err := EncodeCommit(c)
	if err != nil {
		f.log.Error("feed: encoding a commit", "err", err)
		return
	}
	msg := nats.NewMsg(f.subject)
	msg.Data = data
	if n := len(c.Records); n > 0 {
		msg.Header.Set(HeaderFirstRevision, strconv.FormatInt(c.Records[0].Revision, 10))
		msg.Header.Set(HeaderLastRevision, strconv.FormatInt(c.Records[n-1].Revision, 10))
		if int64(len(data)) > f.nc.MaxPayload()-4096 {
			msg.Data = nil
			msg.Header.Set(HeaderFillTo, strconv.FormatInt(c.Records[n-1].Revision, 10))
			msg.Header.Set(HeaderCompactRevision, strconv.FormatInt(c.CompactRev, 10))
		}
	}
	msg.Header.Set(HeaderMAC, f.mac(msg.Data, msg.Header.Get(HeaderFillTo), msg.Header.Get(HeaderCompactRevision)))
	if err := f.nc.PublishMsg(msg); err != nil {
		f.log.Warn("feed: publishing a commit", "err", err)
	}
}

// Subscribe calls h with every batch this Feed published, in order; a
// message on the subject that this process did not publish (see HeaderMAC)
// is dropped and logged. It returns once the server has the subscription:
// every batch published after it reaches h (unless the subscriber falls
// behind and NATS drops messages).
func (f *Feed) Subscribe(h func(*watch.Commit)) (func(), error) {
	sub, err := f.nc.Subscribe(f.subject, func(m *nats.Msg) {
		if !f.authentic(m) {
			if n := f.forged.Add(1); n == 1 || n%10000 == 0 {
				f.log.Warn("feed: dropped a message this revd did not publish on its commit feed's subject (another client of the NATS server published it)",
					"subject", m.Subject, "dropped_so_far", n)
			}
			return
		}
		if fill := m.Header.Get(HeaderFillTo); fill != "" {
			to, err1 := strconv.ParseInt(fill, 10, 64)
			compact, err2 := strconv.ParseInt(m.Header.Get(HeaderCompactRevision), 10, 64)
			if err1 != nil || err2 != nil {
				f.log.Error("feed: bad fill notice", "fill_to", fill)
				return
			}
			h(&watch.Commit{FillTo: to, CompactRev: compact})
			return
		}
		c, err := DecodeCommit(m.Data)
		if err != nil {
			f.log.Error("feed: undecodable commit", "err", err)
			return
		}
		h(c)
	})
	if err != nil {
		return nil, err
	}
	// Losing messages is survivable (gaps are filled from the journal) but
	// costly: allow a deep buffer.
	if err := sub.SetPendingLimits(1<<20, 1<<30); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	// A PING/PONG round trip after the SUB: the server has registered it.
	if err := f.nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return func() { sub.Unsubscribe() }, nil
}

// EncodeCommit encodes a batch as a revd.feed.v1.Commit.
func EncodeCommit(c *watch.Commit) ([]byte, error) {
	m := &feedv1.Commit{CompactRevision: c.CompactRev, Revisions: make([]*feedv1.Revision, len(c.Records))}
	for i, r := range c.Records {
		m.Revisions[i] = &feedv1.Revision{Revision: r.Revision, Events: r.Events}
	}
	return proto.Marshal(m)
}

// DecodeCommit decodes a revd.feed.v1.Commit.
func DecodeCommit(data []byte) (*watch.Commit, error) {
	var m feedv1.Commit
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	c := &watch.Commit{CompactRev: m.CompactRevision, Records: make([]journal.Record, len(m.Revisions))}
	for i, r := range m.Revisions {
		c.Records[i] = journal.Record{Revision: r.Revision, Events: r.Events}
	}
	return c, nil
}
