package sequencer

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"revd/journal"
	"revd/projections/mvcc"
)

// gateLog is a Log whose Append blocks until the test lets it through, the
// batch then durable and applied, and records every batch: one batch in
// flight at a time.
type gateLog struct {
	mu      sync.Mutex
	batches []*Batch
	entered chan struct{}
	release chan error
}

func (g *gateLog) Append(b *Batch) (<-chan error, error) {
	g.entered <- struct{}{}
	if err := <-g.release; err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.batches = append(g.batches, b)
	g.mu.Unlock()
	done := make(chan error, 1)
	done <- nil
	return done, nil
}

func newSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	})))
	t.Cleanup(sys.Shutdown)
	return sys
}

const waitLimit = 10 * time.Second

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero
}

// TestGroupCommit: while one batch is being synced, every command that
// arrives is decided and queued; they are all written in the next batch, and
// none is answered before its batch is durable and published.
func TestGroupCommit(t *testing.T) {
	sys := newSystem(t)
	log := &gateLog{entered: make(chan struct{}, 1), release: make(chan error)}
	var mu sync.Mutex
	var published []int64
	a := New(Options{Core: NewCore(mvcc.NewMemory(), nil), Log: log, OnCommit: func(b *Batch) {
		mu.Lock()
		for _, r := range b.Records {
			published = append(published, r.Revision)
		}
		mu.Unlock()
	}})
	pid := sys.Root.Spawn(a.Props())
	replies := make(chan Outcome, 100)
	send := func() {
		sys.Root.Send(pid, &Command{Req: put("k", "v"), Reply: func(o Outcome) {
			mu.Lock()
			if len(published) == 0 || published[len(published)-1] < o.Rev {
				t.Errorf("revision %d answered before it was published (%v)", o.Rev, published)
			}
			mu.Unlock()
			replies <- o
		}})
	}
	send()
	recv(t, log.entered) // the first batch is in Append
	for i := 0; i < 20; i++ {
		send()
	}
	// Let the actor decide all 20 (its mailbox is asynchronous) while the
	// first batch is still in Append.
	deadline := time.Now().Add(waitLimit)
	for a.q.Len() < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 20 commands queued", a.q.Len())
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case o := <-replies:
		t.Fatalf("answered before the fsync: %+v", o)
	default:
	}
	log.release <- nil // first batch durable
	if o := recv(t, replies); o.Rev != 2 {
		t.Fatalf("first reply rev %d, want 2", o.Rev)
	}
	recv(t, log.entered) // the second batch: everything that queued meanwhile
	log.release <- nil
	seen := map[int64]bool{}
	for i := 0; i < 20; i++ {
		o := recv(t, replies)
		if o.Err != nil || seen[o.Rev] {
			t.Fatalf("reply %+v (seen %v)", o, seen)
		}
		seen[o.Rev] = true
	}
	for rev := int64(3); rev <= 22; rev++ {
		if !seen[rev] {
			t.Fatalf("revision %d missing: revisions are not gap-free", rev)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.batches) != 2 || len(log.batches[1].Records) != 20 {
		t.Fatalf("batches: %d, second has %d records; want 2 and 20", len(log.batches), len(log.batches[1].Records))
	}
}

// TestJournalFailureStopsWrites: a failed Append answers its commands with an
// error and every later command too.
func TestJournalFailureStopsWrites(t *testing.T) {
	sys := newSystem(t)
	log := &gateLog{entered: make(chan struct{}, 1), release: make(chan error, 1)}
	failed := make(chan error, 1)
	a := New(Options{Core: NewCore(mvcc.NewMemory(), nil), Log: log, OnFail: func(err error) { failed <- err }})
	pid := sys.Root.Spawn(a.Props())
	replies := make(chan Outcome, 10)
	sys.Root.Send(pid, &Command{Req: put("k", "v"), Reply: func(o Outcome) { replies <- o }})
	recv(t, log.entered)
	log.release <- errors.New("disk on fire")
	if o := recv(t, replies); o.Err == nil {
		t.Fatal("command of a failed batch answered without error")
	}
	recv(t, failed)
	sys.Root.Send(pid, &Command{Req: put("k", "v"), Reply: func(o Outcome) { replies <- o }})
	if o := recv(t, replies); o.Err == nil {
		t.Fatal("command after a journal failure answered without error")
	}
}

// TestAdmitWhenDecided: a command's Admit runs when its turn comes, after
// every command sent before it was decided, not when it was sent; a refused
// command takes no revision and is answered with Admit's error, in order,
// and the revisions stay gap-free.
func TestAdmitWhenDecided(t *testing.T) {
	sys := newSystem(t)
	log := &gateLog{entered: make(chan struct{}, 1), release: make(chan error)}
	go func() {
		for range log.entered {
			log.release <- nil
		}
	}()
	a := New(Options{Core: NewCore(mvcc.NewMemory(), nil), Log: log})
	pid := sys.Root.Spawn(a.Props())
	replies := make(chan Outcome, 10)
	reply := func(o Outcome) { replies <- o }
	allowed := true // read and written on the actor's goroutine only
	errRevoked := errors.New("revoked")
	admit := func(LeaseKeys) error {
		if !allowed {
			return errRevoked
		}
		return nil
	}
	// The first command's Admit revokes the permission once it has passed,
	// as a revoke landing between two writes' turns would.
	sys.Root.Send(pid, &Command{Req: put("a", "1"), Reply: reply, Admit: func(keys LeaseKeys) error {
		err := admit(keys)
		allowed = false
		return err
	}})
	sys.Root.Send(pid, &Command{Req: put("b", "1"), Reply: reply, Admit: admit})
	sys.Root.Send(pid, &Command{Req: put("c", "1"), Reply: reply})
	if o := recv(t, replies); o.Err != nil || o.Rev != 2 {
		t.Fatalf("first command: %+v, want revision 2", o)
	}
	if o := recv(t, replies); !errors.Is(o.Err, errRevoked) || o.Rev != 0 || len(o.Events) != 0 {
		t.Fatalf("command refused by Admit: %+v", o)
	}
	if o := recv(t, replies); o.Err != nil || o.Rev != 3 {
		t.Fatalf("command after the refused one: %+v, want revision 3", o)
	}
	close(log.entered)
}

// TestChangeJoinsGroupCommit: an auth change and an alarm list submitted
// while a batch is being written go into the next batch, after the commands
// decided before them, and are answered only once that batch is durable.
func TestChangeJoinsGroupCommit(t *testing.T) {
	sys := newSystem(t)
	log := &gateLog{entered: make(chan struct{}, 1), release: make(chan error)}
	a := New(Options{Core: NewCore(mvcc.NewMemory(), nil), Log: log})
	pid := sys.Root.Spawn(a.Props())
	replies := make(chan Outcome, 10)
	sys.Root.Send(pid, &Command{Req: put("k", "v"), Reply: func(o Outcome) { replies <- o }})
	recv(t, log.entered) // the first batch is in Append
	sys.Root.Send(pid, &Command{Req: put("k", "w"), Reply: func(o Outcome) { replies <- o }})
	for a.q.Len() < 1 {
		time.Sleep(time.Millisecond)
	}
	changed := make(chan error, 2)
	on := true
	a.Submit(&Change{Auth: []journal.AuthChange{{Enabled: &on}}, Reply: func(err error) { changed <- err }})
	a.Submit(&Change{Alarms: []journal.Alarm{{MemberID: 1, Type: 1}}, SetAlarms: true, Reply: func(err error) { changed <- err }})
	log.release <- nil
	recv(t, replies)
	recv(t, log.entered) // the second batch
	select {
	case err := <-changed:
		t.Fatalf("change answered before its batch was durable: %v", err)
	default:
	}
	log.release <- nil
	for range 2 {
		if err := recv(t, changed); err != nil {
			t.Fatal(err)
		}
	}
	if o := recv(t, replies); o.Rev != 3 {
		t.Fatalf("second put at revision %d, want 3", o.Rev)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	b := log.batches[1]
	if len(b.Records) != 1 || b.Records[0].Revision != 3 || len(b.Auth) != 1 || !*b.Auth[0].Enabled ||
		!b.SetAlarms || len(b.Alarms) != 1 {
		t.Fatalf("second batch: %+v", b)
	}
}
