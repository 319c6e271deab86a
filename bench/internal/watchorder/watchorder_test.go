package watchorder

import (
	"context"
	"testing"
	"time"

	"revd/bench/internal/revdtest"
)

func TestRun(t *testing.T) {
	ep := revdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A bucket of 1 token refilled every second: the first put goes at
	// once, the second waits.
	puts, err := Run(ctx, Config{Endpoint: ep, Streams: 3, WatchersPerStream: 2, Puts: 4, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(puts) != 4 {
		t.Fatalf("%d puts, want 4", len(puts))
	}
	if puts[0].Paced || !puts[1].Paced {
		t.Errorf("paced: %v, %v; want the first put at once and the second after a wait", puts[0].Paced, puts[1].Paced)
	}
	for i, p := range puts {
		if p.Answered.IsZero() || len(p.Events) != 6 {
			t.Fatalf("put %d: answered %v, %d events, want 6", i, p.Answered, len(p.Events))
		}
		for w, e := range p.Events {
			// A put's event comes after the put is sent, so after the
			// previous put's answer.
			if e.IsZero() || i > 0 && e.Before(puts[i-1].Answered) {
				t.Errorf("put %d: watcher %d got its event at %v, the previous put was answered at %v", i, w, e, puts[i-1].Answered)
			}
		}
	}
	if a := Analyze(puts); a.Burst != 1 || a.Events != 24 {
		t.Errorf("burst %d, events %d; want 1, 24", a.Burst, a.Events)
	}
}

func TestRunDeadline(t *testing.T) {
	ep := revdtest.Start(t)
	// Ten puts at one a second cannot finish in half a second.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, Config{Endpoint: ep, Streams: 1, WatchersPerStream: 1, Puts: 10, Rate: 1}); err == nil {
		t.Fatal("Run outlived its context")
	}
}
