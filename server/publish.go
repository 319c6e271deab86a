package server

import (
	"context"
	"slices"
	"time"

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
	return atLeader(s, ctx, "publishAttributes", a, func() (*raftv1.MemberAttributes, error) {
		if !s.lead.ready() {
			return nil, errNotLeaderHere
		}
		if err := s.props.publish(a); err != nil {
			return nil, outcomeErr(err)
		}
		return a, nil
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
