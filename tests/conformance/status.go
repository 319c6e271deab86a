package conformance

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// CheckStatusShape verifies the fields of a Maintenance.Status answer that
// depend on the server (ids, term, raft index, database sizes) for
// plausibility and returns a copy with them cleared, for comparison with
// etcd's answer.
func CheckStatusShape(s *Server, st *pb.StatusResponse) (*pb.StatusResponse, error) {
	if err := s.CheckHeader(st.Header); err != nil {
		return nil, err
	}
	switch {
	case st.Leader != st.Header.MemberId:
		return nil, fmt.Errorf("%s: leader %d is not the member itself (%d)", s.Name, st.Leader, st.Header.MemberId)
	case st.RaftTerm != st.Header.RaftTerm:
		return nil, fmt.Errorf("%s: raftTerm %d differs from header raft_term %d", s.Name, st.RaftTerm, st.Header.RaftTerm)
	case st.RaftIndex == 0 || st.RaftAppliedIndex == 0:
		return nil, fmt.Errorf("%s: raftIndex and raftAppliedIndex must be non-zero (got %d, %d)", s.Name, st.RaftIndex, st.RaftAppliedIndex)
	case st.RaftAppliedIndex > st.RaftIndex:
		return nil, fmt.Errorf("%s: raftAppliedIndex %d above raftIndex %d", s.Name, st.RaftAppliedIndex, st.RaftIndex)
	case st.DbSize <= 0 || st.DbSizeInUse <= 0:
		return nil, fmt.Errorf("%s: dbSize and dbSizeInUse must be positive (got %d, %d)", s.Name, st.DbSize, st.DbSizeInUse)
	case st.DbSizeInUse > st.DbSize:
		return nil, fmt.Errorf("%s: dbSizeInUse %d above dbSize %d", s.Name, st.DbSizeInUse, st.DbSize)
	}
	n := proto.Clone(st).(*pb.StatusResponse)
	n.Header.ClusterId, n.Header.MemberId, n.Header.RaftTerm = 0, 0, 0
	n.Leader, n.RaftTerm, n.RaftIndex, n.RaftAppliedIndex, n.DbSize, n.DbSizeInUse = 0, 0, 0, 0, 0, 0
	return n, nil
}
