package conformance

import (
	"sort"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// unknownMember is a member id neither server has.
const unknownMember = 0x1234567890

// TestCluster compares the Cluster service ("etcdctl member ...") and
// Maintenance's MoveLeader and Defragment on a one-member cluster, or, with
// REVD_CONFORMANCE_MEMBERS, on a follower of a larger one. The requests
// that name "this member" carry each server's own id.
func TestCluster(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	testCluster(t, h)
}

// TestClusterMembers is TestCluster on a follower of a 3-member etcd and a
// 3-member revd.
func TestClusterMembers(t *testing.T) {
	testCluster(t, NewClusterHarness(t, 3, testutil.Options{}))
}

func testCluster(t *testing.T, h *Harness) {
	h.Do("put", put("k", "v"))
	self := func(s *Server) uint64 {
		t.Helper()
		a := s.Call(&pb.StatusRequest{})
		if a.Err != nil {
			t.Fatalf("%s: Status: %v", s.Name, a.Err)
		}
		return a.Resp.(*pb.StatusResponse).Header.MemberId
	}
	refID, tgtID := self(h.Ref), self(h.Target)

	list := func(label string) {
		t.Helper()
		for _, s := range []*Server{h.Ref, h.Target} {
			a := s.Call(&pb.MemberListRequest{Linearizable: true})
			if a.Err != nil {
				t.Fatalf("%s: %s MemberList: %v", label, s.Name, a.Err)
			}
			r := a.Resp.(*pb.MemberListResponse)
			// etcd's Cluster headers carry no revision.
			if r.Header == nil || r.Header.MemberId != self(s) || r.Header.ClusterId == 0 || r.Header.RaftTerm == 0 || r.Header.Revision != 0 {
				t.Fatalf("%s: %s MemberList header: %s", label, s.Name, text(r.Header))
			}
			if len(r.Members) != h.Members {
				t.Fatalf("%s: %s lists %d members, want %d:\n%s", label, s.Name, len(r.Members), h.Members, text(r))
			}
			var names []string
			for _, m := range r.Members {
				// Each listens to its peers and clients on ports of its
				// own.
				if len(m.PeerURLs) != 1 || len(m.ClientURLs) != 1 || m.IsLearner || m.ID == 0 {
					t.Fatalf("%s: %s lists %s", label, s.Name, text(m))
				}
				names = append(names, m.Name)
				if m.ID != self(s) {
					continue
				}
				name := "default"
				if h.Members > 1 {
					name = m.Name // the cluster's own names, checked below
				}
				if want := (&pb.Member{ID: self(s), Name: name, PeerURLs: m.PeerURLs, ClientURLs: []string{s.Proc.ClientURL}}); !proto.Equal(m, want) {
					t.Fatalf("%s: %s lists itself as\n%s\nwant\n%s", label, s.Name, text(m), text(want))
				}
			}
			sort.Strings(names)
			if h.Members > 1 && strings.Join(names, ",") != "m1,m2,m3" {
				t.Fatalf("%s: %s lists the members %v", label, s.Name, names)
			}
		}
	}
	list("fresh")

	h.Do("remove an unknown member", &pb.MemberRemoveRequest{ID: unknownMember})
	h.Do("update an unknown member", &pb.MemberUpdateRequest{ID: unknownMember, PeerURLs: []string{"http://127.0.0.1:1"}})
	h.Do("promote an unknown member", &pb.MemberPromoteRequest{ID: unknownMember})
	h.DoEach("promote this member", &pb.MemberPromoteRequest{ID: refID}, &pb.MemberPromoteRequest{ID: tgtID})
	for _, urls := range [][]string{nil, {"127.0.0.1:2380"}, {"http://127.0.0.1"}, {"http://127.0.0.1:2380/path"}, {"ftp://127.0.0.1:2380"}, {"http://127.0.0.1:2380", "%"}} {
		h.Do("add a member with peer URLs "+oneLine(&pb.MemberAddRequest{PeerURLs: urls}), &pb.MemberAddRequest{PeerURLs: urls})
	}
	h.Do("move the leadership to an unknown member", &pb.MoveLeaderRequest{TargetID: unknownMember})
	h.DoEach("move the leadership to this member", &pb.MoveLeaderRequest{TargetID: refID}, &pb.MoveLeaderRequest{TargetID: tgtID})
	h.Do("compact", compact(2, true))
	h.Do("defragment", &pb.DefragmentRequest{})
	if h.Members == 1 {
		// A follower of a larger cluster would go (the cluster tests
		// remove members).
		h.DoEach("remove this member", &pb.MemberRemoveRequest{ID: refID}, &pb.MemberRemoveRequest{ID: tgtID})
	}

	// A learner added (a voter would take the lone member's quorum away
	// until it started), listed, and removed again; the new member's id
	// is each server's own (computed from the time).
	learners := map[*Server]uint64{}
	for _, s := range []*Server{h.Ref, h.Target} {
		a := s.Call(&pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:2391"}, IsLearner: true})
		// A cluster refuses changes until its members have been connected
		// for 5 s (--strict-reconfig-check), both alike.
		for deadline := time.Now().Add(20 * time.Second); a.Message() == "etcdserver: unhealthy cluster" && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			a = s.Call(&pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:2391"}, IsLearner: true})
		}
		if a.Err != nil {
			t.Fatalf("%s: add a learner: %v", s.Name, a.Err)
		}
		r := a.Resp.(*pb.MemberAddResponse)
		if !r.Member.IsLearner || len(r.Members) != h.Members+1 || r.Member.ID == 0 || r.Member.Name != "" ||
			len(r.Member.PeerURLs) != 1 || r.Member.PeerURLs[0] != "http://127.0.0.1:2391" {
			t.Fatalf("%s: add a learner answered %s", s.Name, text(r))
		}
		learners[s] = r.Member.ID
	}
	// A new member's id is computed from its peer URLs and the time in
	// seconds: the same URL within the same second is the same id ("member
	// ID already exist"), later a taken URL.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	h.Do("add the same peer URL again", &pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:2391"}, IsLearner: true})
	h.DoEach("promote the learner that never started", &pb.MemberPromoteRequest{ID: learners[h.Ref]}, &pb.MemberPromoteRequest{ID: learners[h.Target]})
	for _, s := range []*Server{h.Ref, h.Target} {
		if a := s.Call(&pb.MemberRemoveRequest{ID: learners[s]}); a.Err != nil {
			t.Fatalf("%s: remove the learner: %v", s.Name, a.Err)
		}
	}
	list("after the changes")
	h.Do("read after it all", &pb.RangeRequest{Key: []byte("k")})
}
