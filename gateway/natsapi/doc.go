// Package natsapi is revd's NATS front door: it serves etcd's KV, Lease,
// Watch, Auth and Maintenance calls as NATS request/reply.
//
// # Subjects
//
// Serve registers a NATS micro service named "revd" (so `nats micro ls`,
// `nats micro info revd` and `nats micro stats revd` work) with one endpoint
// per call. With the default subject prefix "revd" the subjects are:
//
//	revd.kv.range               RangeRequest        -> RangeResponse
//	revd.kv.put                 PutRequest          -> PutResponse
//	revd.kv.delete_range        DeleteRangeRequest  -> DeleteRangeResponse
//	revd.kv.txn                 TxnRequest          -> TxnResponse
//	revd.kv.compact             CompactionRequest   -> CompactionResponse
//	revd.maintenance.status     StatusRequest       -> StatusResponse
//
// With Options.Lease set, the lease endpoints too (lease.go):
//
//	revd.lease.grant            LeaseGrantRequest       -> LeaseGrantResponse
//	revd.lease.revoke           LeaseRevokeRequest      -> LeaseRevokeResponse
//	revd.lease.timetolive       LeaseTimeToLiveRequest  -> LeaseTimeToLiveResponse
//	revd.lease.leases           LeaseLeasesRequest      -> LeaseLeasesResponse
//	revd.lease.keepalive        LeaseKeepAliveRequest   -> LeaseKeepAliveResponse
//
// keepalive is one request of etcd's LeaseKeepAlive stream: a client keeps
// a lease alive by calling it every third of the TTL (natsclient.KeepAlive).
//
// With Options.Maintenance set, revd's own maintenance calls
// (maintenance.go; messages in protos/revd/maintenance/v1):
//
//	revd.maintenance.checkpoint CheckpointRequest       -> CheckpointResponse
//	revd.maintenance.hash       HashRequest             -> HashResponse
//
// checkpoint writes a consistent copy of the data directory into an absolute
// path on the server's machine, for the offline journal tools; hash is the
// state hash of revd/projections/statehash at a revision.
//
// Options.SubjectPrefix replaces the leading "revd" (for example "test1"
// gives "test1.kv.put"). Each revd needs a prefix of its own: endpoints use
// the micro queue group "q", so two servers on one prefix would split the
// requests between two independent stores. Serve therefore refuses to
// start when something already answers on <prefix>.maintenance.status (a
// best-effort check, not a lock).
//
// # Payloads
//
// A request is the protobuf encoding (proto3 wire format, as produced by
// proto.Marshal) of the etcd request message from
// go.etcd.io/etcd/api/v3/etcdserverpb; a successful reply is the protobuf
// encoding of the matching response message. The messages are exactly the
// ones etcd's gRPC API carries, so a response read over NATS is
// byte-for-byte what the gRPC gateway would answer. An empty payload is a
// valid request (all fields zero).
//
// # Errors
//
// A failed call is answered with a NATS micro error: a reply with the
// headers
//
//	Nats-Service-Error-Code: <gRPC status code, in decimal>
//	Nats-Service-Error:      <gRPC status message>
//
// and an empty body. The code and message are those etcd's gRPC server
// returns for the same request, for example
//
//	3  etcdserver: key is not provided
//	11 etcdserver: mvcc: required revision has been compacted
//	11 etcdserver: mvcc: required revision is a future revision
//
// so a client can rebuild the error with
// rpctypes.Error(status.Error(codes.Code(code), message)) and compare it
// with rpctypes.ErrEmptyKey and friends, as etcd's clientv3 does (package
// revd/client/natsclient does exactly that). Other errors:
//
//   - a payload that does not decode as the endpoint's request message:
//     code 3 (InvalidArgument), "revd: cannot decode <message> from the
//     request payload: <reason>";
//   - a request that outlives Options.RequestTimeout: code 4
//     (DeadlineExceeded), "context deadline exceeded" (not for a write
//     started through a WriteStarter, which ends when durable or refused);
//   - a request that arrives while the service is stopping: code 14
//     (Unavailable), "etcdserver: server stopped" (etcd's own text);
//   - a reply larger than the connection's max_payload: code 8
//     (ResourceExhausted), with the sizes in the message; for a write,
//     which was carried out all the same, the message says so and gives
//     its revision, also in the Revd-Revision header (HeaderRevision);
//   - any other error (not a gRPC status): code 2 (Unknown) and the error
//     text.
//
// A request published without a reply subject cannot be answered; it is
// dropped without being executed (and logged at Warn level).
//
// # Concurrency
//
// The micro framework calls an endpoint's handler serially, one message at
// a time, so no call may hold up the handler. When the KV server is a
// WriteStarter (revd's is), a Put, DeleteRange or writing Txn is decoded
// and started in the handler, and the server's callback, once the write is
// durable or refused, queues its answer for a publishing goroutine (the
// callback runs on the server's writer, which must not wait for NATS): no
// goroutine waits for the write, as in revd's gRPC front door (a goroutine
// and a context timer per write had cost more than a third of the NATS
// path's CPU at 100 writers). Every other call runs in a goroutine of its
// own with a context that expires after Options.RequestTimeout. Either way
// one slow put never holds up the next request, and the server's group
// commit sees many writes at once. At most Options.MaxInFlight started
// writes, and apart from them at most Options.MaxInFlight other calls, run
// at a time (a write counting until its answer is published), so writes
// held up by a slow disk do not starve reads and Status; when that many
// are running, further requests wait in the NATS subscription's pending
// queue. Replies
// therefore need not come back in request order; NATS request/reply
// matches each reply to its request. Because a
// call outlives the micro handler, the service's STATS count requests but
// not their errors, and their processing times only cover the hand-off.
//
// (*Service).Stop stops the micro service (no new requests are taken;
// requests already delivered are answered with "server stopped") and waits
// for running calls to finish.
//
// The NATS server (embedded or not), the commit feed and etcd's users on
// the bus belong to package bus, which this package uses.
package natsapi
