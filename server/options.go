package server

import (
	"log/slog"
)

// DefaultMaxRequestBytes is etcd's default request size limit (1.5 MiB).
const DefaultMaxRequestBytes = 1536 * 1024

// DefaultShards is the number of key-shard actors when Options.Splits is nil.
const DefaultShards = 4

// Options configure New. Only DataDir is required.
type Options struct {
	// DataDir is the data directory; created if missing.
	DataDir string
	// Name is the member name, reported by Status. Default "default".
	Name string
	// MaxRequestBytes bounds write requests as etcd's --max-request-bytes
	// does. Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// Splits are the key-shard split points in increasing order: shard i
	// holds keys in [Splits[i-1], Splits[i]). Default: DefaultShards shards
	// split evenly over printable ASCII first bytes.
	Splits [][]byte
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "default"
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
