// Package etcdkv is etcd 3.7's KV semantics over revd's MVCC views: request
// validation, Range (filters, sorting, limits, counts), Put, DeleteRange and
// Txn (compares, nested transactions, duplicate-key rules), answering with
// etcd's messages and errors.
//
// It is pure code: it reads through a ReadView and writes through a
// WriteView, and knows nothing of actors, journals or networks. The sequencer
// runs write requests through it against its own store (a WriteTxn), and the
// read path runs Range and read-only Txn requests through it against a
// consistent multi-shard view, so both answer exactly alike.
//
// The order of checks and the shape of responses follow etcd's server
// (v3rpc's request checks, then the applier): where two errors apply, etcd's
// first one wins here too.
package etcdkv
