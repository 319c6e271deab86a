package main

import (
	"os"
	"strings"
	"testing"
)

// TestSyncLatency: both kinds of sync are timed, in the directory given,
// and leave no file behind.
func TestSyncLatency(t *testing.T) {
	dir := t.TempDir()
	for _, extended := range []bool{false, true} {
		d, err := syncLatency(dir, 20, extended)
		if err != nil {
			t.Fatal(err)
		}
		if d <= 0 {
			t.Fatalf("extended=%v: median %v", extended, d)
		}
	}
	if got := describeSync(dir, 5); !strings.Contains(got, "growing the file") || !strings.Contains(got, "extended beforehand") {
		t.Fatalf("description %q", got)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d files left behind", len(left))
	}
}
