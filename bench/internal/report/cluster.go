package report

import (
	"slices"
	"time"
)

// Failover is one server's outcome of one failover round: the cluster's
// leader killed with SIGKILL while a writer writes through every member
// (see revd/bench/internal/failover).
type Failover struct {
	Status Status
	Err    string
	// Killed names the leader that was killed; Elected the member that
	// led once writes were acknowledged again.
	Killed, Elected string
	// Time runs from the SIGKILL to the acknowledgement of the first write
	// begun after it; LeaderAfter from the SIGKILL to the first Status
	// answer naming the next leader (0 if none was seen).
	Time, LeaderAfter time.Duration
	// Begun counts the writes begun from the kill until that
	// acknowledgement; Errors counts the failures among them by message.
	Begun  int
	Errors map[string]int
}

// FailoverRound is one round of the failover measurement on each server.
type FailoverRound struct{ Etcd, Revd Failover }

// Run returns the round's outcome on the given server ("etcd" or "revd").
func (r *FailoverRound) Run(server string) *Failover {
	if server == "etcd" {
		return &r.Etcd
	}
	return &r.Revd
}

// FailoverTime is a server's failover figure over rounds: its first failed
// round's failure if any, else the median of its measured rounds' times
// (the lower of the two middle ones for an even count); NotRun if none was
// measured. A round that failed (no write acknowledged again in time) is
// the figure, not an outlier the median hides.
func FailoverTime(rounds []FailoverRound, server string) Value {
	var ts []time.Duration
	for i := range rounds {
		f := rounds[i].Run(server)
		switch f.Status {
		case OK:
			ts = append(ts, f.Time)
		case NotRun:
		default:
			return Value{Status: f.Status, Err: f.Err}
		}
	}
	if len(ts) == 0 {
		return Value{Status: NotRun}
	}
	slices.Sort(ts)
	return Dur(ts[(len(ts)-1)/2])
}
