package lease

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/dispatch"
	"revd/actors/sequencer"
	"revd/projections/lease"
)

// Defaults for Options.
const (
	// DefaultExtend is etcd's default election timeout: a member that
	// becomes leader (a restarted single member included) gives every
	// lease this much on top of its full TTL.
	DefaultExtend = time.Second
	// DefaultRetry is etcd's expiredLeaseRetryInterval: an expired lease
	// whose revoke has not landed is fired again after this long.
	DefaultRetry = 3 * time.Second
)

// Options configure New. Index and Expire are required.
type Options struct {
	// Index is the lease index as of start-up; the actor owns it from now
	// on and keeps it up to date from the batches it is sent.
	Index *lease.Index
	// Expire asks the sequencer to revoke an expired lease (a
	// sequencer.Expiry). It is called on the actor's goroutine and must not
	// block.
	Expire func(id int64, seq uint64)
	// Clock drives the deadlines. Default RealClock().
	Clock Clock
	// Extend is added to every restored lease's TTL at start-up. Default
	// DefaultExtend; negative means none.
	Extend time.Duration
	// Retry is how long an expired lease waits for its revoke before it is
	// fired again. Default DefaultRetry.
	Retry time.Duration
	// Logger gets debug logs of expiries. Default: discard.
	Logger *slog.Logger
}

// Messages the actor takes. Reply functions are called on the actor's
// goroutine and must not block.
type (
	// Committed is a durable batch, sent by the server's commit hook before
	// any command of the batch is answered.
	Committed struct{ Batch *sequencer.Batch }
	// Renew is a keep-alive; Reply gets the TTL, 0 if the lease is unknown
	// or expired.
	Renew struct {
		ID    int64
		Reply func(ttl int64)
	}
	// TimeToLive asks about one lease.
	TimeToLive struct {
		ID    int64
		Keys  bool
		Reply func(TTLInfo)
	}
	// List asks for every lease id, soonest deadline first.
	List struct{ Reply func([]int64) }
	// Promote renews every lease to now + Extend + its TTL (Table.Promote):
	// its member became leader.
	Promote struct{ Extend time.Duration }
	// Reset replaces the table with one over Index (the leases of a raft
	// snapshot installed), each lease with its full TTL.
	Reset struct{ Index *lease.Index }
)

// tick is the timer's wake-up; gen tells a stale one (of a timer replaced
// since) apart, though acting on it would be harmless.
type tick struct{ gen uint64 }

// Actor owns the lease deadlines: a Table in a mailbox, with one timer
// armed for the soonest deadline (not a goroutine or timer per lease).
type Actor struct {
	opts  Options
	table *Table

	send    func(msg any)
	timer   Timer
	timerAt time.Time
	gen     uint64
}

// New returns the actor; spawn it with Props. The restored leases get their
// deadlines now (see NewTable).
func New(opts Options) *Actor {
	if opts.Clock == nil {
		opts.Clock = RealClock()
	}
	if opts.Extend == 0 {
		opts.Extend = DefaultExtend
	} else if opts.Extend < 0 {
		opts.Extend = 0
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Actor{opts: opts, table: NewTable(opts.Index, opts.Clock.Now(), opts.Extend, opts.Retry)}
}

// Props returns props spawning a.
func (a *Actor) Props() *actor.Props {
	return dispatch.Props(a)
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	now := a.opts.Clock.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.send = func(msg any) { root.Send(self, msg) }
	case *actor.Stopping:
		if a.timer != nil {
			a.timer.Stop()
			a.timer = nil
		}
		return
	case *actor.Stopped:
		return
	case *Committed:
		a.table.Apply(m.Batch, now)
	case *Renew:
		// A lease already past its deadline is fired below, not renewed.
		m.Reply(a.table.Renew(m.ID, now))
	case *TimeToLive:
		m.Reply(a.table.TimeToLive(m.ID, m.Keys, now))
	case *List:
		m.Reply(a.table.Leases())
	case *Promote:
		a.table.Promote(now, m.Extend)
	case *Reset:
		a.table = NewTable(m.Index, now, a.opts.Extend, a.opts.Retry)
	case *tick:
		if m.gen == a.gen {
			a.timer, a.timerAt = nil, time.Time{}
		}
	default:
		return
	}
	a.fire(now)
	a.arm(now)
}

// fire sends an expiry for every lease due by now.
func (a *Actor) fire(now time.Time) {
	for _, l := range a.table.Expired(now) {
		a.opts.Logger.Debug("lease expired", "id", l.ID, "ttl", l.TTL)
		a.opts.Expire(l.ID, l.Seq)
	}
}

// arm makes sure a timer will wake the actor at the next deadline.
func (a *Actor) arm(now time.Time) {
	next, ok := a.table.Next()
	if !ok || a.send == nil {
		return
	}
	if a.timer != nil && !a.timerAt.After(next) {
		// Armed for no later than needed: an early wake-up re-arms.
		return
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	a.gen++
	gen, send := a.gen, a.send
	a.timer, a.timerAt = a.opts.Clock.AfterFunc(next.Sub(now), func() { send(&tick{gen: gen}) }), next
}
