package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// Storage integrity (issue 26), against the real revd binary on real
// files: damage to the data directory makes revd refuse to start (exit
// status 1, naming the file) or start with every acknowledged write; a
// torn tail left by a crash recovers without complaint; damage found
// while running answers reads with an error and raises CORRUPT; a WAL
// write that fails stops revd before the write is acknowledged. See
// docs/storage-integrity.md.

const integrityPrefix = "integrity/"

// ackedPut is a put revd acknowledged.
type ackedPut struct {
	value []byte
	rev   int64
}

// integrityValue is the value of key i: size bytes, no zero among them.
func integrityValue(i, size int) []byte {
	v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
	copy(v, strconv.Itoa(i))
	return v
}

// putMany puts keys [from, to) of the integrity prefix with values of size
// bytes, from 8 clients at once, and returns what was acknowledged.
func putMany(t *testing.T, c *testutil.Clients, from, to, size int) map[string]ackedPut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	acked := map[string]ackedPut{}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := fmt.Sprintf("%s%06d", integrityPrefix, i)
				v := integrityValue(i, size)
				resp, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: v})
				if err != nil {
					t.Errorf("put %s: %v", k, err)
					return
				}
				mu.Lock()
				acked[k] = ackedPut{value: v, rev: resp.Header.Revision}
				mu.Unlock()
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return acked
}

// checkPuts reads the integrity prefix back and checks that every
// acknowledged put is there, as acknowledged.
func checkPuts(t *testing.T, c *testutil.Clients, acked map[string]ackedPut) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte(integrityPrefix), RangeEnd: []byte(integrityPrefix[:len(integrityPrefix)-1] + "0")})
	if err != nil {
		t.Fatalf("range: %v", err)
	}
	got := map[string]ackedPut{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = ackedPut{value: kv.Value, rev: kv.ModRevision}
	}
	lost := 0
	for k, a := range acked {
		g, ok := got[k]
		if !ok || !bytes.Equal(g.value, a.value) || g.rev != a.rev {
			lost++
			if lost < 5 {
				t.Errorf("acknowledged put %s (revision %d) reads back as %v (revision %d)", k, a.rev, ok, g.rev)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged puts lost", lost, len(acked))
	}
}

// runRevdOn runs revd on dir until it exits (it must, within 20s) and
// returns its exit status and stderr.
func runRevdOn(t *testing.T, dir string) (int, string) {
	t.Helper()
	ports := testutil.FreePorts(t, 2)
	return runRevd(t, "--data-dir", dir, "--listen-client-urls", "http://127.0.0.1:"+strconv.Itoa(ports[0]),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(ports[1]))
}

// copyDataDir copies a data directory (raft's wal/ and snap/ included),
// keeping the files' zeroed tails sparse.
func copyDataDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o700)
		case d.Type().IsRegular():
			return copySparse(p, to)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func copySparse(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 && slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return out.Truncate(off)
}

// newestFile is the last file of dir matching pattern, in name order (for
// WALs: the newest).
func newestFile(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	slices.Sort(m)
	return m[len(m)-1]
}

func biggestFile(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	var best string
	var size int64
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			best, size = p, fi.Size()
		}
	}
	if best == "" {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	return best
}

// walEnd is where the WAL's written part ends: its zeroed tail (revd
// sizes WALs in advance) begins.
func walEnd(b []byte) int {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return end
}

func editDataFile(t *testing.T, p string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// nonZeroFrom is the offset of the first non-zero byte of b at or after i.
func nonZeroFrom(b []byte, i int) int {
	for b[i] == 0 {
		i++
	}
	return i
}

// TestRevdRefusesDamagedDataDir: revd filled with acknowledged puts and
// stopped, its data directory damaged in one way each time: revd either
// refuses to start (exit status 1, naming the damaged file, and `revctl
// journal verify` names it too), or starts with every acknowledged put,
// or starts with every acknowledged put. Damage to the values made while
// revd runs fails the reads that reach it with CORRUPT, never answering
// other data (and `revctl journal verify` names the file); made while it
// was stopped, it is refused at start (every table block's checksum is
// read at start, beside the index).
func TestRevdRefusesDamagedDataDir(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	p := testutil.StartRevd(t, testutil.Options{})
	// About 5 MiB: a table, and a WAL after it.
	acked := putMany(t, p.Dial(t), 0, 1300, 4<<10)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	clean := p.DataDir

	tests := []struct {
		name string
		// damage returns what revd's refusal must name; "" means revd must
		// start with every acknowledged put.
		damage func(t *testing.T, dir string) string
		// whileRunning: the damage is made while revd runs, to values;
		// the reads that reach them fail.
		whileRunning bool
	}{
		{"WAL: a byte flipped in the middle of its written part (issue 26)", func(t *testing.T, dir string) string {
			w := newestFile(t, dir, "*.log")
			editDataFile(t, w, func(b []byte) []byte { b[nonZeroFrom(b, walEnd(b)/2)] ^= 0x10; return b })
			return filepath.Base(w)
		}, false},
		{"WAL: a byte zeroed in its last record", func(t *testing.T, dir string) string {
			w := newestFile(t, dir, "*.log")
			editDataFile(t, w, func(b []byte) []byte {
				i := walEnd(b) - 200 // past the EOF trailer and the record's end
				for b[i] == 0 {
					i--
				}
				b[i] = 0
				return b
			})
			return filepath.Base(w)
		}, false},
		{"WAL: cut short", func(t *testing.T, dir string) string {
			w := newestFile(t, dir, "*.log")
			editDataFile(t, w, func(b []byte) []byte { return b[:walEnd(b)/2+3] })
			return filepath.Base(w)
		}, false},
		{"WAL: missing", func(t *testing.T, dir string) string {
			w := newestFile(t, dir, "*.log")
			if err := os.Remove(w); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(w)
		}, false},
		{"table of records: a byte flipped in a data block", flipRecordsTable, false},
		{"table of records: a byte flipped in a data block while revd runs", flipRecordsTable, true},
		{"table: missing", func(t *testing.T, dir string) string {
			tb := biggestFile(t, dir, "*.sst")
			if err := os.Remove(tb); err != nil {
				t.Fatal(err)
			}
			return strings.TrimSuffix(filepath.Base(tb), ".sst")
		}, false},
		{"MANIFEST: a byte flipped", func(t *testing.T, dir string) string {
			m := newestFile(t, dir, "MANIFEST-*")
			editDataFile(t, m, func(b []byte) []byte { b[len(b)/2] ^= 0x08; return b })
			return filepath.Base(m)
		}, false},
		{"manifest marker: missing", func(t *testing.T, dir string) string {
			if err := os.Remove(newestFile(t, dir, "marker.manifest.*")); err != nil {
				t.Fatal(err)
			}
			return "marker.manifest"
		}, false},
		{"high-water mark: missing", func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, "revd.hwm")); err != nil {
				t.Fatal(err)
			}
			return "revd.hwm"
		}, false},
		{"raft log: a byte flipped in its records", func(t *testing.T, dir string) string {
			w := newestFile(t, filepath.Join(dir, "wal"), "*.wal")
			editDataFile(t, w, func(b []byte) []byte { b[nonZeroFrom(b, walEnd(b)/2)] ^= 0x10; return b })
			return filepath.Base(w)
		}, false},
		{"raft log: missing (a one-member cluster starts a new one from the journal)", func(t *testing.T, dir string) string {
			if err := os.RemoveAll(filepath.Join(dir, "wal")); err != nil {
				t.Fatal(err)
			}
			return ""
		}, false},
		{"OPTIONS: missing (Pebble rewrites it)", func(t *testing.T, dir string) string {
			if err := os.Remove(newestFile(t, dir, "OPTIONS-*")); err != nil {
				t.Fatal(err)
			}
			return ""
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDataDir(t, clean)
			if tt.whileRunning {
				q := testutil.StartRevd(t, testutil.Options{DataDir: dir})
				name := tt.damage(t, dir)
				readsFailOnDamage(t, q, acked, name)
				if err := q.Stop(); err != nil {
					t.Fatal(err)
				}
				if out, code := revctl(t, "journal", "verify", "--data-dir", dir); code != 1 || !strings.Contains(out, name) {
					t.Errorf("revctl journal verify: exit %d, want 1 naming %s:\n%s", code, name, out)
				}
				return
			}
			name := tt.damage(t, dir)
			if name == "" {
				q := testutil.StartRevd(t, testutil.Options{DataDir: dir})
				checkPuts(t, q.Dial(t), acked)
				return
			}
			code, stderr := runRevdOn(t, dir)
			if code != 1 || !strings.Contains(stderr, name) || !strings.Contains(stderr, "refusing to start") {
				t.Fatalf("revd on a damaged directory: exit %d, want 1 naming %s; stderr:\n%s", code, name, stderr)
			}
			t.Logf("revd: %s", lastLines(stderr, 2))
			out, code := revctl(t, "journal", "verify", "--data-dir", dir)
			if code != 1 || !strings.Contains(out, name) {
				t.Errorf("revctl journal verify: exit %d, want 1 naming %s:\n%s", code, name, out)
			}
			if strings.HasPrefix(tt.name, "WAL: a byte flipped") {
				salvage(t, dir, acked)
			}
		})
	}
}

// flipRecordsTable flips a byte in the middle of the biggest table, which
// holds the records, where the values are, and returns its number.
func flipRecordsTable(t *testing.T, dir string) string {
	tb := biggestFile(t, dir, "*.sst")
	editDataFile(t, tb, func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b })
	return strings.TrimSuffix(filepath.Base(tb), ".sst")
}

// readsFailOnDamage reads every acknowledged put of a revd whose values
// are damaged in table file (its number): each read answers the put as
// acknowledged or fails saying the data is corrupt, at least one fails, and
// revd then raises the CORRUPT alarm and logs the file.
func readsFailOnDamage(t *testing.T, p *testutil.Proc, acked map[string]ackedPut, file string) {
	t.Helper()
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failed := 0
	for k, a := range acked {
		resp, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte(k)})
		if err != nil {
			if !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("read of %s: %v, want an error saying the data is corrupt", k, err)
			}
			failed++
			continue
		}
		if len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, a.value) || resp.Kvs[0].ModRevision != a.rev {
			t.Fatalf("read of %s answered other data than its acknowledged put at revision %d", k, a.rev)
		}
	}
	if failed == 0 {
		t.Fatalf("no read of the %d acknowledged puts reached the damage", len(acked))
	}
	t.Logf("%d of %d reads failed; the rest answered right", failed, len(acked))
	waitCorruptAlarm(ctx, t, c)
	if out := p.Tail(64 << 10); !strings.Contains(out, file) {
		t.Errorf("the log does not name the damaged table %s:\n%s", file, lastLines(out, 20))
	}
}

// salvage rebuilds what is left of a directory revd refused (revctl
// journal rebuild --accept-loss): revd starts on the rebuilt directory,
// which holds the acknowledged puts up to the damage, and nothing else.
func salvage(t *testing.T, dir string, acked map[string]ackedPut) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "salvaged")
	if msg, code := revctl(t, "journal", "rebuild", "--data-dir", dir, "--out", out); code == 0 {
		t.Fatalf("rebuild without --accept-loss succeeded: %s", msg)
	}
	if msg, code := revctl(t, "journal", "rebuild", "--data-dir", dir, "--out", out, "--accept-loss"); code != 0 {
		t.Fatalf("rebuild --accept-loss: exit %d: %s", code, msg)
	}
	q := testutil.StartRevd(t, testutil.Options{DataDir: out})
	resp, err := q.Dial(t).KV.Range(context.Background(), &pb.RangeRequest{Key: []byte(integrityPrefix),
		RangeEnd: []byte(integrityPrefix[:len(integrityPrefix)-1] + "0")})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	var last int64
	for _, kv := range resp.Kvs {
		a, ok := acked[string(kv.Key)]
		if !ok || !bytes.Equal(a.value, kv.Value) || a.rev != kv.ModRevision {
			t.Fatalf("salvaged %s at %d was never acknowledged so", kv.Key, kv.ModRevision)
		}
		kept[string(kv.Key)], last = true, max(last, kv.ModRevision)
	}
	for k, a := range acked {
		if a.rev <= last && !kept[k] {
			t.Fatalf("salvaged store at revision %d lacks %s (revision %d)", last, k, a.rev)
		}
	}
	t.Logf("salvaged %d of %d acknowledged puts (up to revision %d)", len(kept), len(acked), last)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestRevdRecoversTornTail: revd killed (SIGKILL) while writing, and the
// write it was making torn as a power loss tears it (its header on disk,
// the sectors after it never written): revd starts without complaint with
// every acknowledged put. The same directory with a byte of an
// acknowledged put damaged instead is refused: the two are told apart.
func TestRevdRecoversTornTail(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's data directory")
	}
	p := testutil.StartRevd(t, testutil.Options{})
	acked := putMany(t, p.Dial(t), 0, 300, 300)
	p.Kill()
	killed := p.DataDir

	torn := copyDataDir(t, killed)
	w := newestFile(t, torn, "*.log")
	num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(w), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	editDataFile(t, w, func(b []byte) []byte {
		// A WAL-sync chunk header (Pebble's format) for a 1500-byte record
		// at the end of the written part, then one sector of its payload;
		// the rest of it never reached the disk (zeroes).
		at := walEnd(b)
		if rest := 32<<10 - at%(32<<10); rest < 1600 {
			at += rest // a chunk never crosses a 32 KiB block
		}
		h := b[at:]
		binary.LittleEndian.PutUint32(h, 0xdeadbeef) // its CRC, over bytes it never got
		binary.LittleEndian.PutUint16(h[4:], 1500)
		h[6] = 9 // full chunk, WAL sync format
		binary.LittleEndian.PutUint32(h[7:], uint32(num))
		binary.LittleEndian.PutUint64(h[11:], uint64(at))
		for i := 19; i < 512-at%512; i++ {
			h[i] = 0x5a
		}
		return b
	})
	q := testutil.StartRevd(t, testutil.Options{DataDir: torn})
	checkPuts(t, q.Dial(t), acked)
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}

	damaged := copyDataDir(t, killed)
	w = newestFile(t, damaged, "*.log")
	editDataFile(t, w, func(b []byte) []byte { b[nonZeroFrom(b, walEnd(b)*2/3)] ^= 0x04; return b })
	code, stderr := runRevdOn(t, damaged)
	if code != 1 || !strings.Contains(stderr, filepath.Base(w)) {
		t.Fatalf("revd on a killed directory with an acknowledged put damaged: exit %d; stderr:\n%s", code, stderr)
	}
}
