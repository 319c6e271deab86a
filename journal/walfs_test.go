package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// crashDirEnv and crashRecsEnv tell TestCommitThenCrash's child process
// where to write and how many records.
const (
	crashDirEnv  = "REVD_JOURNAL_TEST_CRASH_DIR"
	crashRecsEnv = "REVD_JOURNAL_TEST_CRASH_RECORDS"
)

// bigValue is large enough for a few dozen records to fill a memtable, so
// that the child's journal moves through several WAL files.
var bigValue = strings.Repeat("v", 128<<10)

func crashRecord(rev int64) Record {
	return Record{Revision: rev, Events: []*mvccpb.Event{putEv(fmt.Sprintf("k%d", rev%5), fmt.Sprintf("%d:%s", rev, bigValue), rev, rev, 1)}}
}

// TestCommitThenCrashChild is not a test: run as a child process by
// TestCommitThenCrash, it commits records one batch each, prints each
// committed revision, and then waits to be killed.
func TestCommitThenCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCommitThenCrash")
	}
	n, _ := strconv.Atoi(os.Getenv(crashRecsEnv))
	j, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for rev := int64(2); rev < int64(2+n); rev++ {
		b := j.NewBatch()
		r := crashRecord(rev)
		b.AppendRecord(r.Revision, r.Events)
		if err := j.Commit(b); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(rev)
	}
	select {} // killed by the parent
}

// TestCommitThenCrash kills a process that has committed records (without
// closing the journal, so the newest WAL ends in its extended, zeroed
// tail) and checks that a reopen finds every committed record. It also
// checks that the newest WAL was extended in advance, which is what makes
// a commit's sync cheaper (see walFS).
func TestCommitThenCrash(t *testing.T) {
	const n = 80 // about 10 MiB: several WAL files at a 4 MiB memtable
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitThenCrashChild$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRecsEnv+"="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // on every way out, a failed check included
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var last int64
	sc := bufio.NewScanner(out)
	for last < int64(n+1) && sc.Scan() {
		rev, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		last = rev
	}
	if runtime.GOOS == "linux" {
		wal := newestWAL(t, dir)
		if fi, err := os.Stat(wal); err != nil {
			t.Error(err)
		} else if fi.Size() < 4<<20 {
			t.Errorf("newest WAL %s: size %d, want the preallocated >= 4 MiB", filepath.Base(wal), fi.Size())
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if last != int64(n+1) {
		t.Fatalf("child committed up to %d, want %d", last, n+1)
	}

	j := openT(t, dir)
	if m := j.Meta(); m.LastRev != last {
		t.Fatalf("LastRev after the crash = %d, want %d", m.LastRev, last)
	}
	got, err := collect(j.Records(0, 0))
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	want := make([]Record, 0, n)
	for rev := int64(2); rev <= last; rev++ {
		want = append(want, crashRecord(rev))
	}
	equalRecords(t, got, want)
	// And the reopened journal goes on where the dead one stopped.
	commitT(t, j, crashRecord(last+1))
}

func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, err)
	}
	newest := logs[0]
	for _, l := range logs[1:] {
		if filepath.Base(l) > filepath.Base(newest) {
			newest = l
		}
	}
	return newest
}
