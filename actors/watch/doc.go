// Package watch holds revd's watcher actors: etcd's Watch semantics on top
// of the journal and the commit feed.
//
// The Hub actor owns every watcher of a server, in two sets, as etcd's
// watchableStore does:
//
//   - synced watchers are caught up with the hub's revision; each commit that
//     arrives on the feed is matched against them (single keys through a map,
//     ranges through an interval tree, never a scan of all watchers) and each
//     matching watcher gets one response per revision with that revision's
//     events, in the order the operations ran;
//   - unsynced watchers are behind: new watchers with a past start revision,
//     and victims, whose stream could not take a response. On sync rounds the
//     hub reads the journal for them, a bounded number of revisions at a
//     time, until they reach the hub's revision and join the synced set. As
//     etcd's catch-up does, a response holds many whole revisions: up to
//     1000 of those with events for the watcher, however many rounds it
//     took to read them (sync.go).
//
// A watcher is never sent a revision twice and never skips one: the hub
// delivers revisions strictly in order, tracks each watcher's next revision,
// and the feed's revisions are checked for gaps (a gap is filled from the
// journal). A slow client only ever makes its own watchers unsynced: the
// hub never blocks on a stream.
//
// A Stream is one client's multiplexed watch session (a gRPC Watch stream, or
// a NATS watch): it assigns watch ids, answers create, cancel and progress
// requests, and sends responses from a bounded queue on its own goroutine.
// A progress response never reaches a watcher ahead of an event it covers
// (etcd's "bookmarkable" guarantee): the stream answers a progress request
// as it reads it, in order with the others, from what the hub publishes
// under the stream's lock (progress.go).
package watch
