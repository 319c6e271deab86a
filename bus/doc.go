// Package bus is revd's NATS bus: the NATS server revd runs inside its
// process (or the one it is given), the commit feed every durable batch is
// published on, and etcd's users as users of the bus. It is not a front
// door: the watch hub follows the feed, and the NATS API (package
// gateway/natsapi) serves its request-reply endpoints over the same
// server; both use this package.
//
// # The commit feed
//
// Feed publishes each durable batch on "<prefix>.feed" (FeedEndpoint) as a
// revd.feed.v1.Commit, with headers that let a subscriber skip batches
// without decoding them, and an HMAC (HeaderMAC) that revd's own watch hub
// checks, so that no client of the bus can slip events to watchers. A batch
// too large for one message goes out without a body (HeaderFillTo): the
// subscriber reads those revisions from the journal. Delivery is at most
// once; subscribers detect gaps by revision and fill them from the journal.
//
// # The embedded NATS server
//
// StartEmbedded runs a nats-server inside the process. Its Listen option is
// "host:port" (default "127.0.0.1:4222", port 0 picks a free port) or "off":
// no TCP listener at all, and clients in the same process connect with
// nats.InProcessServer(ns). The embedded server logs through the given
// *slog.Logger, or not at all, and never installs signal handlers. Its
// max_payload defaults to 8 MiB, above etcd's default 1.5 MiB request limit;
// a NATS API reply larger than max_payload is refused with ResourceExhausted
// (see gateway/natsapi; use a range limit).
//
// # etcd's users on the bus
//
// BusUsers (with --nats-auth=etcd) lets clients of the embedded server
// connect as etcd's users while authentication is on, each limited to
// revd's requests and its own inboxes (InboxPrefix), root also to the feed;
// an auth change closes the connections it no longer allows before the
// change is answered (Recheck).
package bus
