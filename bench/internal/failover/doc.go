// Package failover measures how long a cluster stops acknowledging writes
// when its leader dies: the time from the leader's SIGKILL to the
// acknowledgement of the first write begun after it.
//
// The Writer begins a put every Options.Interval, through the members'
// endpoints in turn, without waiting for earlier puts to end (an open
// loop). A closed loop would measure something else: a write sent to a
// follower just before the kill is forwarded to the dead leader and, in
// etcd, waits out the server's request timeout (about 7 s) however soon a
// new leader is elected; a writer stuck on it begins nothing new. With an
// open loop, writes keep being begun every Interval whatever happens to the
// earlier ones, so the first one begun after the kill and acknowledged is
// known to within Interval. Each write has its own deadline
// (Options.Timeout), and every write's start, end and outcome are kept
// (Writer.Stop returns them).
//
// The pure part is FirstAck (the failover time from that record) and
// Leader (which member the members agree leads, from their Status
// answers); the harness kills the leader, restarts it and takes the median
// over rounds.
package failover
