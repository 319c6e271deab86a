package server

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/authgate"
)

// A member tells the cluster its name and client URLs once it runs, as
// etcd's members publish their attributes: through the log, so that every
// member lists them (and so that the cluster knows the member started,
// which a member with a wiped data directory must not claim again). The
// leader proposes them; another member forwards them to it.

// publishAttributes proposes a member's attributes (the leader's end).
func (s *Server) publishAttributes(ctx context.Context, a *raftv1.MemberAttributes) (*raftv1.MemberAttributes, error) {
	return proposeAtLeader(s, ctx, "publishAttributes", a, &raftv1.Entry{Attributes: a})
}

// shareToken proposes a simple auth token (the leader's end), for
// authgate.Options.ShareToken.
func (s *Server) shareToken(ctx context.Context, t *raftv1.SimpleToken) (*raftv1.SimpleToken, error) {
	return proposeAtLeader(s, ctx, "shareToken", t, &raftv1.Entry{Token: t})
}

// proposeAtLeader proposes e, an entry of no batch, where the leader runs
// it (here when this member leads and is ready; at the leader, which gets
// m as method name, otherwise), and answers m once this member applied it.
func proposeAtLeader[M proto.Message](s *Server, ctx context.Context, name string, m M, e *raftv1.Entry) (M, error) {
	if err := s.requestLimit(nil); err != nil {
		var zero M
		return zero, err
	}
	return atLeader(s, ctx, name, m, func() (M, error) {
		var zero M
		if !s.lead.ready() {
			return zero, errNotLeaderHere
		}
		if err := s.props.proposeEntry(e); err != nil {
			return zero, outcomeErr(err)
		}
		return m, nil
	})
}

// publishMember publishes this member's attributes on every start, as etcd
// does, until this member applied them or the server closes, trying again
// every election timeout; then it closes s.ready.
func (s *Server) publishMember() {
	a := &raftv1.MemberAttributes{MemberId: s.meta.MemberID, Name: s.opts.Name, ClientUrls: s.opts.ClientURLs}
	published := false
	for {
		if !published {
			ctx, cancel := context.WithTimeout(authgate.AsServer(context.Background()), s.requestTimeout())
			_, err := s.publishAttributes(ctx, a)
			cancel()
			if published = err == nil; published {
				s.log.Info("published the member's attributes", "name", a.Name, "client_urls", a.ClientUrls)
			}
		}
		// The leader answered once it applied them; this member may not
		// have yet.
		if m := s.cluster.member(s.meta.MemberID); published && m != nil && m.Name == a.Name && slices.Equal(m.ClientUrls, a.ClientUrls) {
			close(s.ready)
			return
		}
		wait := s.electionTimeout()
		if published {
			wait = 10 * time.Millisecond
		}
		select {
		case <-s.closing:
			return
		case <-time.After(wait):
		}
	}
}
