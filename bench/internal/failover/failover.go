package failover

import (
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Write is one write of a Writer.
type Write struct {
	// Start and End are when the write was sent and when its answer (or
	// its failure) came back.
	Start, End time.Time
	// Member is the index of the endpoint it was sent to.
	Member int
	// Err is the failure's message; "" for an acknowledged write.
	Err string
}

// OK reports whether the write was acknowledged.
func (w Write) OK() bool { return w.Err == "" }

// Outcome is what the writes around a kill say.
type Outcome struct {
	// Time runs from the kill to the acknowledgement of the first write
	// begun at or after it (the earliest such acknowledgement).
	Time time.Duration
	// First is that write.
	First Write
	// Begun counts the writes begun from the kill until First's
	// acknowledgement; Errors counts the failures among them by message.
	Begun  int
	Errors map[string]int
}

// ErrNoAck is returned by FirstAck when no write begun at or after the kill
// was acknowledged.
var ErrNoAck = errors.New("failover: no write begun after the kill was acknowledged")

// FirstAck finds, among writes, the first write begun at or after kill and
// acknowledged (the earliest End), and what happened to the others begun
// before that acknowledgement. Writes begun before the kill never count,
// even if acknowledged after it: they may have been committed by the old
// leader before it died.
func FirstAck(writes []Write, kill time.Time) (Outcome, error) {
	var out Outcome
	found := false
	for _, w := range writes {
		if w.OK() && !w.Start.Before(kill) && (!found || w.End.Before(out.First.End)) {
			out.First, found = w, true
		}
	}
	if !found {
		return out, ErrNoAck
	}
	out.Time = out.First.End.Sub(kill)
	out.Errors = map[string]int{}
	for _, w := range writes {
		if w.Start.Before(kill) || w.Start.After(out.First.End) {
			continue
		}
		out.Begun++
		if !w.OK() && !w.End.After(out.First.End) {
			out.Errors[w.Err]++
		}
	}
	return out, nil
}

// Median is the middle of ds (the lower of the two middle ones for an even
// count); 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// ErrNoLeader is returned (wrapped) by Leader when the members do not
// agree on a leader among them.
var ErrNoLeader = errors.New("failover: no leader the members agree on")

// Leader returns the index of the member that the members who answered
// agree leads, from their Status answers (statuses[i] is member i's, nil
// if it did not answer). Every member that answered must name the same
// leader, and that leader must be one of them: a leader that does not
// answer is no leader to write through.
func Leader(statuses []*pb.StatusResponse) (int, error) {
	lead, answered := uint64(0), 0
	for i, st := range statuses {
		if st == nil {
			continue
		}
		answered++
		if st.Leader == 0 {
			return -1, fmt.Errorf("%w: member %d has none", ErrNoLeader, i)
		}
		if lead != 0 && st.Leader != lead {
			return -1, fmt.Errorf("%w: members name %x and %x", ErrNoLeader, lead, st.Leader)
		}
		lead = st.Leader
	}
	if answered == 0 {
		return -1, fmt.Errorf("%w: no member answered", ErrNoLeader)
	}
	for i, st := range statuses {
		if st != nil && st.Header != nil && st.Header.MemberId == lead {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: the leader %x did not answer", ErrNoLeader, lead)
}
