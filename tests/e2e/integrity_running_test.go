package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"golang.org/x/sys/unix"

	"revd/tests/testutil"
)

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRevdCorruptionWhileRunning: a table block damaged under a running
// revd answers the reads that reach it with an error, never other data;
// revd raises etcd's CORRUPT alarm and logs it, and refuses writes as etcd
// does under that alarm, while reads of what is intact go on.
func TestRevdCorruptionWhileRunning(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 1,400 versions of 64 keys, 4 KiB each: more than a memtable, so the
	// older versions go to a table, and only the newest stay in memory.
	type version struct {
		key   string
		value []byte
		rev   int64
	}
	var versions []version
	for i := range 1400 {
		k := fmt.Sprintf("%sk%02d", integrityPrefix, i%64)
		v := integrityValue(i, 4<<10)
		resp, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: v})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, version{k, v, resp.Header.Revision})
	}
	old := versions[:len(versions)-64] // overwritten since: read from the journal

	bad, failed := "", 0
	for attempt := 0; attempt < 3 && failed == 0; attempt++ {
		// The biggest table holds the records (compressed: the values repeat
		// one byte). A compaction may replace it meanwhile: then damage its
		// successor.
		waitFor(t, time.Minute, "a table of records", func() bool {
			m, _ := filepath.Glob(filepath.Join(p.DataDir, "*.sst"))
			for _, f := range m {
				if fi, err := os.Stat(f); err == nil && fi.Size() > 64<<10 {
					return true
				}
			}
			return false
		})
		bad = biggestFile(t, p.DataDir, "*.sst")
		editDataFile(t, bad, func(b []byte) []byte {
			for off := len(b) / 8; off < len(b)*7/8; off += 16 << 10 {
				b[off] ^= 0x01
			}
			return b
		})
		for _, v := range old {
			resp, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte(v.key), Revision: v.rev})
			if err != nil {
				if !strings.Contains(err.Error(), "corrupt") {
					t.Fatalf("read of %s at %d: %v, want an error saying the data is corrupt", v.key, v.rev, err)
				}
				failed++
				continue
			}
			if len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, v.value) || resp.Kvs[0].ModRevision != v.rev {
				t.Fatalf("read of %s at %d answered other data", v.key, v.rev)
			}
		}
	}
	if failed == 0 {
		t.Fatalf("no read reached the damaged table %s", bad)
	}
	t.Logf("%d of %d reads of older versions failed; the rest answered right", failed, len(old))

	waitCorruptAlarm(ctx, t, c)
	if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("x")}); err == nil ||
		err.Error() != rpctypes.ErrGRPCCorrupt.Error() {
		t.Errorf("put under CORRUPT: %v, want %v", err, rpctypes.ErrGRPCCorrupt)
	}
	last := versions[len(versions)-1]
	if resp, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte(last.key)}); err != nil || !bytes.Equal(resp.Kvs[0].Value, last.value) {
		t.Errorf("read of the newest version under CORRUPT: %v", err)
	}
	if out := p.Tail(64 << 10); !strings.Contains(out, "CORRUPT") || !strings.Contains(out, filepath.Base(bad)) {
		t.Errorf("the log does not report the damage and the alarm:\n%s", lastLines(out, 20))
	}
}

// waitCorruptAlarm waits until revd lists etcd's CORRUPT alarm.
func waitCorruptAlarm(ctx context.Context, t *testing.T, c *testutil.Clients) {
	t.Helper()
	waitFor(t, 30*time.Second, "the CORRUPT alarm", func() bool {
		resp, err := c.Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.Alarms {
			if a.Alarm == pb.AlarmType_CORRUPT {
				return true
			}
		}
		return false
	})
}

// TestRevdStopsOnWALWriteFailure: a write to a log that fails (here the
// file size limit, RLIMIT_FSIZE, set on the running revd just past what it
// has written: EFBIG, as a full disk gives ENOSPC) is never acknowledged,
// and revd stops accepting writes rather than go on: the journal's WAL
// exits the process with status 1 (as etcd exits on a failed fsync), raft's
// log refuses every write from then on. Restarted without the limit, it
// has every acknowledged put.
func TestRevdStopsOnWALWriteFailure(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	acked := putMany(t, c, 0, 100, 1000)
	wal, err := os.ReadFile(newestFile(t, p.DataDir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Past the journal's WAL, at a block boundary, where a full disk stops
	// a write (a limit between two sectors would leave raft's log with a
	// record cut inside a sector, which etcd's WAL, and so revd, refuses).
	limit := uint64(walEnd(wal)+48<<10) / 4096 * 4096
	if err := unix.Prlimit(p.Pid(), unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatal(err)
	}
	refused := putUntilRefused(t, c, acked, 100, 1000)
	t.Logf("%d puts acknowledged; then %v", len(acked), refused)
	expectWritesStopped(t, p, c)
	p.Kill()
	p.Restart(t)
	checkPuts(t, p.Dial(t), acked)
}

// putUntilRefused puts keys from the integrity prefix, from key from on,
// one at a time, recording what is acknowledged, until a put fails, and
// returns that failure.
func putUntilRefused(t *testing.T, c *testutil.Clients, acked map[string]ackedPut, from, size int) error {
	t.Helper()
	for i := from; i < from+100000; i++ {
		k := fmt.Sprintf("%s%06d", integrityPrefix, i)
		v := integrityValue(i, size)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: v})
		cancel()
		if err != nil {
			return err
		}
		acked[k] = ackedPut{value: v, rev: resp.Header.Revision}
	}
	t.Fatal("every put succeeded")
	return nil
}

// expectWritesStopped checks that a revd whose log write failed stopped
// accepting writes: it exited with status 1 saying why, or it runs on and
// refuses every write, having logged why.
func expectWritesStopped(t *testing.T, p *testutil.Proc, c *testutil.Clients) {
	t.Helper()
	select {
	case <-p.Exited():
		var ee *exec.ExitError
		if err := p.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("revd ended with %v, want exit status 1:\n%s", err, lastLines(p.Tail(16<<10), 15))
		}
		if out := p.Tail(16 << 10); !strings.Contains(out, "fatal storage error") {
			t.Errorf("revd's output does not say why it stopped:\n%s", lastLines(out, 10))
		}
		t.Logf("revd exited: %s", lastLines(p.Tail(16<<10), 2))
	case <-time.After(5 * time.Second):
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("x")})
		cancel()
		if err == nil {
			t.Fatalf("revd acknowledged a write after a failed log write:\n%s", lastLines(p.Tail(16<<10), 15))
		}
		if out := p.Tail(64 << 10); !strings.Contains(out, "refusing all writes") {
			t.Errorf("revd's log does not say it stopped writing:\n%s", lastLines(out, 15))
		}
		t.Logf("revd runs on, refusing writes")
	}
}

// TestRevdDiskFull fills a small file system under revd (a tmpfs mounted
// for the test, so it needs root; it must hold raft's 64 MiB log segment):
// the put that finds no room is not acknowledged and revd stops accepting
// writes (expectWritesStopped); once the file system is grown, revd
// restarts with every acknowledged put. Without root,
// TestRevdStopsOnWALWriteFailure covers the failed write.
func TestRevdDiskFull(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root; TestRevdStopsOnWALWriteFailure covers a failed WAL write")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=80m"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); TestRevdStopsOnWALWriteFailure covers a failed WAL write", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	p := testutil.StartRevd(t, testutil.Options{DataDir: filepath.Join(mnt, "data")})
	c := p.Dial(t)
	acked := map[string]ackedPut{}
	refused := putUntilRefused(t, c, acked, 0, 16<<10)
	t.Logf("%d puts acknowledged, then: %v", len(acked), refused)
	expectWritesStopped(t, p, c)
	p.Kill()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_REMOUNT, "size=256m"); err != nil {
		t.Fatal(err)
	}
	p.Restart(t)
	checkPuts(t, p.Dial(t), acked)
}
