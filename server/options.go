package server

import (
	"log/slog"
	"time"

	leaseactor "revd/actors/lease"
	"revd/actors/watch"
	"revd/internal/etcdkv"
	"revd/server/alarm"
	"revd/server/authgate"
	"revd/server/internal/reqsize"
)

// DefaultMaxRequestBytes is etcd's default request size limit (1.5 MiB).
const DefaultMaxRequestBytes = reqsize.DefaultMaxBytes

// Auth defaults, etcd's (see package authgate).
const (
	// DefaultAuthToken is etcd's --auth-token: simple tokens.
	DefaultAuthToken = authgate.DefaultToken
	// DefaultAuthTokenTTL is etcd's --auth-token-ttl: a simple token lives
	// this long after its last use.
	DefaultAuthTokenTTL = authgate.DefaultTokenTTL
	// DefaultBcryptCost is etcd's --bcrypt-cost (bcrypt.DefaultCost).
	DefaultBcryptCost = authgate.DefaultBcryptCost
)

// DefaultQuotaBytes is etcd's default space quota (2 GiB).
const DefaultQuotaBytes = alarm.DefaultQuotaBytes

// DefaultCacheBytes is Options.CacheBytes's default: 128 MiB.
const DefaultCacheBytes = 128 << 20

// PairCacheShare is the share of Options.CacheBytes that holds the pairs
// single-key reads fetched lately (a 32nd: 4 MiB of the default 128 MiB);
// Pebble's block cache has the rest.
const PairCacheShare = 32

// DefaultShards is the number of key-shard actors when Options.Splits is nil.
const DefaultShards = 4

// Options configure New. Only DataDir is required.
type Options struct {
	// DataDir is the data directory; created if missing.
	DataDir string
	// Name is the member name, reported by Status. Default "default".
	Name string
	// ClientURLs are the URLs clients reach this member at, as
	// Cluster.MemberList reports them (etcd's --advertise-client-urls).
	// Default: none.
	ClientURLs []string
	// MaxRequestBytes bounds write requests as etcd's --max-request-bytes
	// does. Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// CacheBytes is the size of the journal's caches, through which every
	// value a read returns is read: the Go heap holds the keys and their
	// revisions, not the values (see package mvcc). A PairCacheShare-th
	// holds the pairs single-key reads fetched lately, the rest is
	// Pebble's block cache. Default DefaultCacheBytes.
	CacheBytes int64
	// Splits are the key-shard split points in increasing order: shard i
	// holds keys in [Splits[i-1], Splits[i]). Default: DefaultShards shards
	// split evenly over printable ASCII first bytes.
	Splits [][]byte
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger

	// Feed carries durable commits to the watch hub (and any other
	// subscriber). Default: an in-process watch.LocalFeed; revd passes a
	// NATS feed (bus.Feed).
	Feed watch.Feed
	// WatchProgressInterval is how often idle progress_notify watchers are
	// told the current revision. Default 10 minutes, as etcd.
	WatchProgressInterval time.Duration
	// WatchStreamEvents bounds the events buffered for one watch stream.
	// Default 10000.
	WatchStreamEvents int64
	// WatchServerEvents bounds the events buffered for all watch streams
	// together. Default 1000000.
	WatchServerEvents int64
	// WatchServerBytes bounds the bytes (keys and values of the events)
	// buffered for all watch streams together (see watch.Budget). Default
	// DefaultWatchServerBytes.
	WatchServerBytes int64

	// MaxTxnOps is the most operations a Txn branch may hold (etcd's
	// --max-txn-ops). Default etcdkv.MaxTxnOps (128).
	MaxTxnOps int

	// QuotaBackendBytes is the space quota (etcd's --quota-backend-bytes):
	// a write that would take the journal to it raises the NOSPACE alarm
	// (see package alarm). Default DefaultQuotaBytes; negative turns the
	// quota off.
	QuotaBackendBytes int64

	// CommitDuration, if set, is told how long each group commit took to
	// write and sync its batch (etcd's etcd_disk_wal_fsync_duration_seconds).
	// It runs on the writer goroutine before the batch's commands are
	// answered, so it must be quick (a histogram's Observe).
	CommitDuration func(time.Duration)

	// AuthToken is etcd's --auth-token: "simple" (random tokens kept in
	// memory, each living AuthTokenTTL past its last use) or
	// "jwt,pub-key=...,priv-key=...,sign-method=...[,ttl=...]". Default
	// DefaultAuthToken.
	AuthToken string
	// AuthTokenTTL is etcd's --auth-token-ttl. Default DefaultAuthTokenTTL.
	AuthTokenTTL time.Duration
	// BcryptCost is etcd's --bcrypt-cost, the cost of the password hashes.
	// Default DefaultBcryptCost; a cost bcrypt refuses is replaced by it, as
	// etcd does (with a warning).
	BcryptCost int
	// ClientCertAuth is etcd's --client-cert-auth: with authentication on,
	// a request without a token is the user named by the common name of its
	// verified client certificate.
	ClientCertAuth bool

	// OnAuthChange, if set, is called after every change of the auth store
	// (users, roles, permissions, the switch) once it is journaled, before
	// the change's request is answered, with whether authentication was
	// turned on or off. bus.BusUsers.Recheck is one.
	OnAuthChange func(switched bool)

	// Cluster configures raft: the members, the peer URLs, the timing
	// (see ClusterOptions; the zero value is a one-member cluster).
	Cluster ClusterOptions

	// OnRemoved, if set, is called (once, on a goroutine of its own) when
	// this member is removed from the cluster: revd then stops, as etcd
	// does.
	OnRemoved func()

	// CorruptCheckTime is etcd's --corrupt-check-time: how often the
	// leader compares the members' HashKV at its revision, raising the
	// CORRUPT alarm for a member whose hash differs (see hashcheck.go).
	// Default 0: never, as etcd.
	CorruptCheckTime time.Duration
	// PriorityRequest is etcd's feature gate PriorityRequest: a lease
	// revoke is refused for a member's apply backlog only at twice the gap
	// other requests are (see requestlimit.go). Default off, as etcd.
	PriorityRequest bool
	// CompactHashCheck is etcd's feature gate CompactHashCheck: every
	// CompactHashCheckTime the leader compares the hashes the members
	// computed at their last compactions. Default off, as etcd.
	CompactHashCheck bool
	// CompactHashCheckTime is etcd's --compact-hash-check-time. Default
	// DefaultCompactHashCheckTime.
	CompactHashCheckTime time.Duration
	// InitialCorruptCheck is etcd's feature gate InitialCorruptCheck: a
	// member restarting on its data compares its HashKV with the other
	// members' before it starts raft, and New fails with
	// ErrDataInconsistency on a mismatch. Default off, as etcd.
	InitialCorruptCheck bool
	// HashCheckClock times the periodic hash checks. Default RealClock.
	HashCheckClock Clock

	// LeaseClock drives lease deadlines (tests pass a
	// leaseactor.FakeClock). Default: the real clock.
	LeaseClock leaseactor.Clock
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "default"
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = etcdkv.MaxTxnOps
	}
	if o.QuotaBackendBytes == 0 {
		o.QuotaBackendBytes = DefaultQuotaBytes
	}
	if o.Feed == nil {
		o.Feed = &watch.LocalFeed{}
	}
	if o.WatchStreamEvents <= 0 {
		o.WatchStreamEvents = 10000
	}
	if o.WatchServerEvents <= 0 {
		o.WatchServerEvents = 1000000
	}
	if o.CompactHashCheckTime <= 0 {
		o.CompactHashCheckTime = DefaultCompactHashCheckTime
	}
	if o.HashCheckClock == nil {
		o.HashCheckClock = RealClock{}
	}
	if o.WatchServerBytes <= 0 {
		o.WatchServerBytes = DefaultWatchServerBytes
	}
	return o
}
