// Package autocompact is etcd's automatic compaction
// (--auto-compaction-mode, --auto-compaction-retention), for revd.
//
// Two policies, as etcd's v3compactor has them:
//
//   - Periodic keeps a window of time: it samples the current revision
//     every tenth of the window (at most every 6 minutes), and compacts
//     at the revision sampled one window ago, first once the window has
//     passed since start, then every window (at most every hour).
//   - Revision keeps a number of revisions: every 5 minutes it compacts at
//     the current revision minus that number.
//
// Either skips a revision it compacted at already, and counts a compaction
// the store refuses as already done (compacted) as done. The policies are
// plain values driven by Tick (no goroutines, no clock of their own);
// Run drives one with a Clock.
package autocompact

import (
	"context"
	"log/slog"
	"time"
)

// Policy decides, at each tick, at which revision to compact, if any.
type Policy interface {
	// Interval is the time between ticks.
	Interval() time.Duration
	// Sample takes the current revision before each wait.
	Sample(rev int64)
	// Tick takes the current revision after each wait, at now, and
	// returns the revision to compact at, if any.
	Tick(now time.Time, rev int64) (compactAt int64, ok bool)
	// Done records that the compaction at rev succeeded at now.
	Done(now time.Time, rev int64)
}

// NewPeriodic returns the periodic policy keeping window (positive),
// started at now.
func NewPeriodic(window time.Duration, now time.Time) Policy {
	itv := min(window, time.Hour)
	return &periodic{
		window: window, compactEvery: itv, retry: itv / 10,
		samples: int(window/(itv/10)) + 1, lastSuccess: now, base: window,
	}
}

type periodic struct {
	window, compactEvery, retry time.Duration
	samples                     int // how many samples make a window

	revs        []int64 // the samples of the last window
	last        int64   // revision last compacted at
	lastSuccess time.Time
	base        time.Duration // the wait after lastSuccess: window, then compactEvery
}

func (p *periodic) Interval() time.Duration { return p.retry }

func (p *periodic) Sample(rev int64) {
	p.revs = append(p.revs, rev)
	if len(p.revs) > p.samples {
		p.revs = p.revs[1:] // revs[0] is the revision one window ago
	}
}

func (p *periodic) Tick(now time.Time, _ int64) (int64, bool) {
	if len(p.revs) == 0 {
		return 0, false
	}
	at := p.revs[0]
	if now.Sub(p.lastSuccess) < p.base || at == p.last {
		return 0, false
	}
	p.base = p.compactEvery
	return at, true
}

func (p *periodic) Done(now time.Time, rev int64) {
	p.last, p.lastSuccess = rev, now
}

// RevisionInterval is how often the revision policy compacts, as etcd's.
const RevisionInterval = 5 * time.Minute

// NewRevision returns the revision policy keeping keep revisions
// (positive).
func NewRevision(keep int64) Policy { return &revision{keep: keep} }

type revision struct {
	keep, last int64
}

func (r *revision) Interval() time.Duration { return RevisionInterval }

func (r *revision) Sample(int64) {}

func (r *revision) Tick(_ time.Time, rev int64) (int64, bool) {
	at := rev - r.keep
	if at <= 0 || at == r.last {
		return 0, false
	}
	return at, true
}

func (r *revision) Done(_ time.Time, rev int64) { r.last = rev }

// Clock is the time source of Run.
type Clock interface {
	Now() time.Time
	After(time.Duration) <-chan time.Time
}

// RealClock is the system's clock.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure Run. Policy, Rev and Compact are required.
type Options struct {
	Policy Policy
	// Rev is the store's current revision.
	Rev func() int64
	// Compact compacts at rev; done reports that it succeeded or that the
	// store was compacted there or above already.
	Compact func(ctx context.Context, rev int64) (done bool, err error)
	// Clock. Default RealClock.
	Clock Clock
	// Logger. Default: discard.
	Logger *slog.Logger
}

// Run drives opts.Policy until ctx ends.
func Run(ctx context.Context, opts Options) {
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := opts.Policy
	for {
		p.Sample(opts.Rev())
		select {
		case <-ctx.Done():
			return
		case <-opts.Clock.After(p.Interval()):
		}
		at, ok := p.Tick(opts.Clock.Now(), opts.Rev())
		if !ok {
			continue
		}
		start := opts.Clock.Now()
		done, err := opts.Compact(ctx, at)
		if !done {
			opts.Logger.Warn("auto compaction failed", "revision", at, "err", err)
			continue
		}
		p.Done(opts.Clock.Now(), at)
		opts.Logger.Info("auto compaction done", "revision", at, "took", opts.Clock.Now().Sub(start))
	}
}
