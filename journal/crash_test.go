package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Power loss and crashes at random points, two ways:
//
//   - TestPowerLoss runs the journal on Pebble's crash-simulating memory
//     file system and takes, while a writer commits, the image a power
//     loss would leave (vfs.MemFS.CrashClone: everything synced, a random
//     share of what was not).
//   - TestProcessCrash runs a child process on real files through hookFS,
//     which keeps every write in memory until its file is synced, and
//     kills it: what is on disk then is what a power loss leaves.
//
// Both check that the image opens without complaint and holds every record
// whose commit returned before the cut, and that damage to an
// acknowledged record of the image is refused. Each runs a few cuts; set
// REVD_CRASH_CUTS to run more (the long run: REVD_CRASH_CUTS=500).

func crashCuts(t *testing.T, short int) int {
	if s := os.Getenv("REVD_CRASH_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("REVD_CRASH_CUTS=%q: want a positive number", s)
		}
		return n
	}
	return short
}

// cutRecord is the record of revision rev in the crash tests: one put of
// a value from 100 bytes to 40 KiB, so that the memtable fills and Pebble
// flushes and moves to new WALs within a few hundred commits.
func cutRecord(rev int64) Record {
	size := 100 + int(rev*7919%(40<<10))
	v := bytes.Repeat([]byte{byte('A' + rev%26)}, size)
	copy(v, fmt.Sprintf("rev %d;", rev))
	return Record{Revision: rev, Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
		Key: fmt.Appendf(nil, "k%03d", rev%97), Value: v, CreateRevision: rev, ModRevision: rev, Version: 1,
	}}}}
}

// checkAcked opens the image in dir, which must open, and checks that it
// holds records 2..acked as cutRecord makes them; later records may be
// there too (committed, not acknowledged). It returns the last revision.
func checkAcked(t *testing.T, fsys vfs.FS, dir string, acked int64) int64 {
	t.Helper()
	j, err := Open(dir, Options{FS: fsys, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatalf("the image of a crash after %d acknowledged records does not open: %v", acked, err)
	}
	defer j.Close()
	next := int64(2)
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		want := cutRecord(next)
		if rec.Revision != next || !bytes.Equal(rec.Events[0].Kv.Value, want.Events[0].Kv.Value) {
			t.Fatalf("record %d: got revision %d, value %.20q", next, rec.Revision, rec.Events[0].Kv.Value)
		}
		next++
	}
	if next-1 < acked {
		t.Fatalf("the image holds records up to %d, but %d were acknowledged", next-1, acked)
	}
	return next - 1
}

// damageAcked flips a byte of a random chunk of the image's newest WAL,
// before the chunks of its last record (whose commit may not have
// returned). It returns false if that WAL holds too little.
func damageAcked(t *testing.T, fsys vfs.FS, dir string, rng *rand.Rand) (string, bool) {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return "", false
	}
	p := fsys.PathJoin(dir, newest)
	data, err := readAll(fsys, p)
	if err != nil {
		t.Fatal(err)
	}
	var cs []chunk
	lastStart := -1 // index of the first chunk of the last record
	for pos := int64(0); pos < int64(len(data)); {
		lim := min(int64(len(data)), (pos/logBlock+1)*logBlock)
		if blockPadding(data[pos:lim]) {
			pos = lim
			continue
		}
		c, why := readHeader(data, pos)
		if why != "" || !crcOK(data, c) || c.log != uint32(mustLogNum(t, newest)) {
			break
		}
		if c.pos == posFull || c.pos == posFirst {
			lastStart = len(cs)
		}
		cs = append(cs, c)
		pos = c.end()
	}
	if lastStart < 2 {
		return "", false
	}
	c := cs[rng.IntN(lastStart)]
	off := c.off + rng.Int64N(int64(c.headerLen+c.length))
	f, err := fsys.OpenReadWrite(p, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{data[off] ^ byte(1+rng.IntN(255))}, off); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s at offset %d (chunk at %d)", newest, off, c.off), true
}

func mustLogNum(t *testing.T, name string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// expectRefused opens a damaged image, which must be refused.
func expectRefused(t *testing.T, fsys vfs.FS, dir, what string) {
	t.Helper()
	j, err := Open(dir, Options{FS: fsys, CacheBytes: 1 << 20})
	if err == nil {
		last := j.Meta().LastRev
		j.Close()
		t.Fatalf("damaged %s: Open succeeded, at revision %d", what, last)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged %s: Open: %v, want ErrCorrupt", what, err)
	}
}

func TestPowerLoss(t *testing.T) {
	cuts := crashCuts(t, 16)
	seed := rand.Uint64()
	t.Logf("seed %d, %d cuts", seed, cuts)
	rng := rand.New(rand.NewPCG(seed, 1))
	refused := 0
	defer func() { t.Logf("%d images damaged in an acknowledged record, all refused", refused) }()
	for cut := range cuts {
		mem := vfs.NewCrashableMem()
		j, err := Open("/data", Options{FS: mem, CacheBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var acked atomic.Int64
		acked.Store(1)
		progress := make(chan struct{}, 1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the single writer, as the sequencer is
			defer wg.Done()
			for rev := int64(2); ; rev++ {
				select {
				case <-stop:
					return
				default:
				}
				r := cutRecord(rev)
				b := j.NewBatch()
				b.AppendRecord(r.Revision, r.Events)
				if err := j.Commit(b); err != nil {
					t.Error(err)
					return
				}
				acked.Store(rev)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
		target := int64(2 + rng.IntN(400))
		for acked.Load() < target {
			<-progress
		}
		before := acked.Load()
		image := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
		close(stop)
		wg.Wait()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}

		last := checkAcked(t, image, "/data", before)
		// The same image, with an acknowledged record damaged.
		damaged := image.CrashClone(vfs.CrashCloneCfg{})
		if what, ok := damageAcked(t, damaged, "/data", rng); ok {
			expectRefused(t, damaged, "/data", what)
			refused++
		}
		if cut < 3 || testing.Verbose() {
			t.Logf("cut %d: %d acknowledged, the image holds %d", cut, before, last)
		}
	}
}

// Environment of TestProcessCrash's child.
const (
	crashChildDirEnv     = "REVD_JOURNAL_TEST_CUT_DIR"
	crashChildFailEnv    = "REVD_JOURNAL_TEST_FAIL" // "sync:N" or "nospace:N"
	crashChildAppliedEnv = "REVD_JOURNAL_TEST_APPLIED"
)

// TestProcessCrashChild is not a test: run as a child process by
// TestProcessCrash and TestWriteFailure, it commits records one per commit
// through hookFS (lazy, and failing as crashChildFailEnv says) and prints
// each revision whose commit returned.
func TestProcessCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildDirEnv)
	if dir == "" {
		t.Skip("helper process for TestProcessCrash and TestWriteFailure")
	}
	fsys := hookFS{FS: vfs.Default, lazy: true}
	if spec := os.Getenv(crashChildFailEnv); spec != "" {
		fsys.fail = failAfter(spec)
	}
	j, err := Open(dir, Options{FS: fsys, CacheBytes: 1 << 20})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	commit := j.Commit
	if os.Getenv(crashChildAppliedEnv) != "" {
		// A raft member's commits, and its syncs (before raft snapshots).
		commit = func(b *Batch) error {
			if err := j.CommitApplied(b); err != nil {
				return err
			}
			return j.Sync()
		}
	}
	out := bufio.NewWriter(os.Stdout)
	for rev := j.Meta().LastRev + 1; ; rev++ {
		r := cutRecord(rev)
		b := j.NewBatch()
		b.AppendRecord(r.Revision, r.Events)
		if err := commit(b); err != nil {
			fmt.Fprintln(out, "error:", err)
			out.Flush()
			os.Exit(4)
		}
		fmt.Fprintln(out, rev)
		out.Flush()
	}
}

// failAfter injects a failure into the write-ahead logs: "sync:N" fails
// every sync of a WAL after the first N, "nospace:N" every write after the
// first N with ENOSPC.
func failAfter(spec string) func(op, path string) error {
	kind, n, _ := strings.Cut(spec, ":")
	limit, _ := strconv.Atoi(n)
	var count atomic.Int64
	return func(op, path string) error {
		if !strings.HasSuffix(path, ".log") {
			return nil
		}
		switch {
		case kind == "sync" && op == "sync" && count.Add(1) > int64(limit):
			return syscall.EIO
		case kind == "nospace" && op == "write" && count.Add(1) > int64(limit):
			return syscall.ENOSPC
		}
		return nil
	}
}

// runCrashChild starts the child on dir and returns it with its stdout.
func runCrashChild(t *testing.T, dir, fail string, applied bool) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessCrashChild$", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), crashChildDirEnv+"="+dir, crashChildFailEnv+"="+fail)
	if applied {
		cmd.Env = append(cmd.Env, crashChildAppliedEnv+"=1")
	}
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(out), stderr
}

// readAcks reads the child's acknowledged revisions until it has read
// until, or the output ends; the last one read is returned.
func readAcks(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner, stderr *bytes.Buffer, until int64) int64 {
	t.Helper()
	var last int64
	for (until == 0 || last < until) && sc.Scan() {
		line := sc.Text()
		rev, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			if strings.HasPrefix(line, "error:") && until == 0 {
				t.Logf("child: %s", line)
				continue
			}
			// Whatever else it printed, and its stderr once it has
			// ended, say why (a panic's trace goes to stderr).
			rest := []string{line}
			for sc.Scan() {
				rest = append(rest, sc.Text())
			}
			_ = cmd.Wait()
			t.Fatalf("child said %q; stderr:\n%s", rest, stderr)
		}
		last = rev
	}
	return last
}

func TestProcessCrash(t *testing.T) {
	cuts := crashCuts(t, 4)
	seed := rand.Uint64()
	t.Logf("seed %d, %d cuts", seed, cuts)
	rng := rand.New(rand.NewPCG(seed, 2))
	dir := t.TempDir()
	var prev int64 = 1
	for cut := range cuts {
		cmd, sc, stderr := runCrashChild(t, dir, "", false)
		target := prev + 1 + int64(rng.IntN(300))
		acked := readAcks(t, cmd, sc, stderr, target)
		_ = cmd.Process.Kill()
		// What the child printed before it died was acknowledged too.
		if more := readAcks(t, cmd, sc, stderr, 0); more > acked {
			acked = more
		}
		_ = cmd.Wait()
		if acked < target {
			t.Fatalf("cut %d: the child stopped at %d before %d: %s", cut, acked, target, stderr)
		}
		prev = checkAcked(t, vfs.Default, dir, acked)
		if cut < 3 || testing.Verbose() {
			t.Logf("cut %d: %d acknowledged, the directory holds %d", cut, acked, prev)
		}
		if cut == cuts-1 {
			damaged := copyDir(t, dir)
			if what, ok := damageAcked(t, vfs.Default, damaged, rng); ok {
				expectRefused(t, vfs.Default, damaged, what)
			}
		}
	}
}

// TestWriteFailure: a WAL whose sync fails, or whose writes fail with
// ENOSPC (a full disk), stops the process with exit status 1 before the
// commit is acknowledged, as etcd stops on a failed fsync, for synced
// commits and for a raft member's (CommitApplied, then Sync); reopened
// once the disk works, the directory holds every acknowledged record.
func TestWriteFailure(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		applied bool
	}{{"sync:40", false}, {"nospace:120", false}, {"sync:40", true}, {"nospace:120", true}} {
		spec := tc.spec
		if tc.applied {
			spec += ",applied"
		}
		t.Run(spec, func(t *testing.T) {
			dir := t.TempDir()
			cmd, sc, stderr := runCrashChild(t, dir, tc.spec, tc.applied)
			acked := readAcks(t, cmd, sc, stderr, 0)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("child ended with %v after %d acknowledged, want exit status 1; stderr:\n%s", err, acked, stderr)
			}
			if !strings.Contains(stderr.String(), "fatal storage error") {
				t.Errorf("stderr does not say why:\n%s", stderr)
			}
			if acked < 2 {
				t.Fatalf("the failure came before any commit (acknowledged %d)", acked)
			}
			last := checkAcked(t, vfs.Default, dir, acked)
			t.Logf("%d acknowledged before the failure; reopened at %d", acked, last)
		})
	}
}

// A cluster member applies raft's log unsynced (CommitApplied): a power
// loss may take those commits, and the journal must then open without
// complaint (raft's log applies them again), so the mark moves only when
// they are durable: at Sync, and at Close.
func TestCommitAppliedMark(t *testing.T) {
	mem := vfs.NewCrashableMem()
	j, err := Open("/data", Options{FS: mem, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(from, to int64) {
		for rev := from; rev <= to; rev++ {
			r := cutRecord(rev)
			b := j.NewBatch()
			b.AppendRecord(r.Revision, r.Events)
			b.SetApplied(Applied{Index: uint64(rev), Term: 2})
			if err := j.CommitApplied(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(2, 40)
	// Lost to a power loss: the image opens, before the unsynced commits.
	image := mem.CrashClone(vfs.CrashCloneCfg{})
	if last := checkAcked(t, image, "/data", 1); last >= 40 {
		t.Logf("the image kept %d unsynced records", last)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	apply(41, 60)
	image = mem.CrashClone(vfs.CrashCloneCfg{})
	if last := checkAcked(t, image, "/data", 40); last > 40 {
		t.Logf("the image kept %d", last)
	}
	// The mark says 40: an image that lost synced records is refused.
	damaged := image.CrashClone(vfs.CrashCloneCfg{})
	if what, ok := damageAcked(t, damaged, "/data", rand.New(rand.NewPCG(1, 2))); ok {
		expectRefused(t, damaged, "/data", what)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	checkAcked(t, mem, "/data", 60) // Close made everything durable, and marked it
}
