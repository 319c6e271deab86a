package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// syncLatency is the median time of n appends of a 400-byte record (about a
// put's journal entry) each followed by a data sync, in a new file in dir:
// the floor under a one-client put on that disk. With extended, the file is
// first extended to its final size (as etcd preallocates its WAL segments),
// so that no sync has to persist the file's growth; without, it grows with
// every append (as a fresh Pebble WAL does).
func syncLatency(dir string, n int, extended bool) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "synclat-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 400)
	if extended {
		if _, err := f.WriteAt(make([]byte, len(rec)*(n+1)), 0); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	times := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		st := time.Now()
		if _, err := f.WriteAt(rec, int64(i*len(rec))); err != nil {
			return 0, err
		}
		if err := dataSync(f); err != nil {
			return 0, err
		}
		times = append(times, time.Since(st))
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// describeSync measures both kinds of sync on the data directories' disk.
func describeSync(dir string, n int) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "unknown: " + err.Error()
	}
	grow, err := syncLatency(dir, n, false)
	if err != nil {
		return "unknown: " + err.Error()
	}
	ext, err := syncLatency(dir, n, true)
	if err != nil {
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("median of %d 400-byte appends each with a data sync in %s: %s growing the file, %s in a file extended beforehand",
		n, filepath.Clean(dir), grow.Round(time.Microsecond), ext.Round(time.Microsecond))
}
