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
	// A bucket of 2 tokens refilled every 500 ms: the first 2 puts go at
	// once, the rest wait.
	puts, err := Run(ctx, Config{Endpoint: ep, Streams: 3, WatchersPerStream: 2, Puts: 6, Rate: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(puts) != 6 {
		t.Fatalf("%d puts, want 6", len(puts))
	}
	for i, p := range puts {
		if p.Answered.IsZero() || len(p.Events) != 6 {
			t.Fatalf("put %d: answered %v, %d events, want 6", i, p.Answered, len(p.Events))
		}
		for w, e := range p.Events {
			if e.IsZero() {
				t.Errorf("put %d: watcher %d never got its event", i, w)
			}
		}
		if p.Paced != (i >= 2) {
			t.Errorf("put %d: paced %v", i, p.Paced)
		}
	}
	a := Analyze(puts)
	if a.Burst != 2 || a.Events != 36 || a.TailPuts == 0 {
		t.Errorf("burst %d, events %d, tail puts %d; want 2, 36, > 0", a.Burst, a.Events, a.TailPuts)
	}
}
