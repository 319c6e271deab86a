// Package authgate is revd's authentication and authorization, etcd's own:
// etcd's auth store (go.etcd.io/etcd/server/v3/auth: users, roles, range
// permissions, simple or JWT tokens, bcrypt password hashes), run as it is
// on a backend kept in the journal; the checks etcd's API layer and
// appliers make on every call, in their order and with their errors; and
// etcd's Auth service.
//
// A Gate (Open) holds the store. Its methods are the checks the other
// calls make: Caller resolves a request's caller from its token or client
// certificate, once, and the Permit methods judge it (check.go lists them,
// call by call); a KV write is checked when it arrives and again when the
// sequencer decides it (AdmitAs, admit.go), as etcd checks it when it
// applies it. Package server makes those calls; the Maintenance and
// Cluster calls need only RequireUser and RequireAdmin. A Service
// (NewService) is etcd's Auth service on a Gate (service.go), with what
// the front doors ask of authentication besides: the NATS bus's password
// checks (bus.go) and the callers revd's own API clients pass on
// (forward.go).
//
// The auth store is a projection of the journal's "a/" keys, not of its
// records: as in etcd, auth changes take no revision. The store's changes
// reach the journal through Options.Commit (backend.go; package server
// hands them to the sequencer, the journal's single writer, as one
// sequencer.Change that joins the next group commit). A change is durable
// before its call returns, and before any request is checked against it:
// changes hold the gate's lock for writing through their commit, checks
// hold it for reading. With authentication off (the default) a check reads
// one atomic flag and nothing else. A commit that fails breaks the gate:
// every call that consults the store is refused with etcd's "corrupt
// cluster" until a restart reads the durable state. A change lost to a
// leader change (its commit never applied) is undone: the gate goes back to
// the journal's state and the caller gets etcd's "leader changed". Members
// that did not decide a change apply it from the log (Follow).
package authgate
