package main

import (
	"strings"
	"testing"
)

// TestRunSmall runs the benchmark small, with each transport and feed, and
// checks that every watcher's delivery of every measured put was counted.
func TestRunSmall(t *testing.T) {
	for _, c := range []config{
		{watchers: 300, streams: 7, conns: 3, puts: 5, warmup: 2, transport: "grpc", feed: "nats"},
		{watchers: 300, streams: 7, puts: 5, warmup: 2, transport: "direct", feed: "local"},
	} {
		t.Run(c.transport+"/"+c.feed, func(t *testing.T) {
			c.dir = t.TempDir()
			r, err := run(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.all) != c.watchers*c.puts || len(r.slowest) != c.puts {
				t.Fatalf("%d samples, %d per-put maxima; want %d and %d", len(r.all), len(r.slowest), c.watchers*c.puts, c.puts)
			}
			if out := r.String(); !strings.Contains(out, "p99") {
				t.Fatalf("report: %s", out)
			}
		})
	}
}
