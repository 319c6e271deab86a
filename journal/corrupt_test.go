package journal

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Damaging one record is found when the record is read, and the error
// names it; the records before it are still served.
func TestRecordDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, db *pebble.DB)
	}{
		{"payload byte flipped", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, recordKey(4))
			v[crcLen+5] ^= 0x01
			rawSet(t, db, recordKey(4), v)
		}},
		{"checksum byte flipped", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, recordKey(4))
			v[1] ^= 0x80
			rawSet(t, db, recordKey(4), v)
		}},
		{"truncated", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, recordKey(4), rawGet(t, db, recordKey(4))[:3])
		}},
		{"value of another revision", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, recordKey(4), rawGet(t, db, recordKey(5)))
		}},
		{"checksum fixed up, payload of another revision", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, recordKey(5))
			fixCRC(v, 4)
			rawSet(t, db, recordKey(4), v)
		}},
		{"checksum fixed up, payload garbage", func(t *testing.T, db *pebble.DB) {
			v := append([]byte{0, 0, 0, 0}, 0x12, 0xff, 0xff)
			fixCRC(v, 4)
			rawSet(t, db, recordKey(4), v)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openT(t, dir)
			h := newHistory(7, 6)
			commitT(t, j, h.records...)
			closeT(t, j)
			rawEdit(t, dir, func(db *pebble.DB) { tt.damage(t, db) })

			j = openT(t, dir) // the newest record, 6, is intact
			got, err := collect(j.Records(0, 0))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 4") {
				t.Fatalf("Records error = %v, want ErrCorrupt naming record 4", err)
			}
			equalRecords(t, got, withoutPrevKv(h.between(2, 3)))
			if got, err := collect(j.Records(5, 0)); err != nil || !slices.Equal(revisions(got), []int64{5, 6}) {
				t.Errorf("Records(5, 0) = %v, %v; want 5, 6", revisions(got), err)
			}
			compactT(t, j, 6)
			if err := j.Fold(6, 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 4") {
				t.Errorf("Fold error = %v, want ErrCorrupt naming record 4", err)
			}
		})
	}
}

// fixCRC recomputes the checksum of a record value as if stored under rev.
func fixCRC(v []byte, rev int64) {
	c := recordCRC(rev, v[crcLen:])
	v[0], v[1], v[2], v[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

func TestBaseDamage(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(8, 30)
	commitT(t, j, h.records...)
	compactT(t, j, 30)
	if err := j.Fold(30, 0); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	var victim []byte
	rawEdit(t, dir, func(db *pebble.DB) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatal("empty base")
		}
		victim = slices.Clone(it.Key())
		it.Close()
		v := rawGet(t, db, victim)
		v[len(v)-1] ^= 0x01
		rawSet(t, db, victim, v)
	})
	j = openT(t, dir)
	_, err := collect(j.Base())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), string(victim[len(basePrefix):])) {
		t.Errorf("Base error = %v, want ErrCorrupt naming %q", err, victim)
	}
}

// Open refuses directories that it cannot trust, without writing to them.
func TestOpenCorrupt(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares dir; rawEdit runs on a fresh revd store with
		// records 2..6 when set.
		setup   func(t *testing.T, dir string)
		rawEdit func(t *testing.T, db *pebble.DB)
		mention string // in the error message
	}{
		{name: "foreign file", mention: "notes.txt", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "notes.txt"), "hello")
		}},
		{name: "etcd data directory", mention: "member", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "member", "snap"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "garbage CURRENT", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "CURRENT"), "MANIFEST-000009\n")
		}},
		{name: "garbage manifest", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "marker.manifest.000001.MANIFEST-000001"), "")
			writeFile(t, filepath.Join(dir, "MANIFEST-000001"), strings.Repeat("garbage!", 100))
		}},
		{name: "foreign Pebble store", mention: "hello", setup: func(t *testing.T, dir string) {
			rawEdit(t, dir, func(db *pebble.DB) { rawSet(t, db, []byte("hello"), []byte("world")) })
		}},
		{name: "meta value of the wrong size", mention: "m/term", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyTerm, []byte{1, 2, 3})
		}},
		{name: "meta key missing", mention: "m/member_id", rawEdit: func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(keyMemberID, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "newer layout", mention: "layout version 3", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyFormat, encodeUint64(formatVersion+1))
		}},
		{name: "zero cluster id", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyClusterID, encodeUint64(0))
		}},
		{name: "base above compact", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyBaseRev, encodeUint64(3))
		}},
		{name: "compact above last", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyCompactRev, encodeUint64(7))
		}},
		{name: "record at base", mention: "record 2", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyCompactRev, encodeUint64(2))
			rawSet(t, db, keyBaseRev, encodeUint64(2))
		}},
		{name: "malformed record key", mention: "rxyz", rawEdit: func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, []byte("rxyz"), []byte("v"))
		}},
		{name: "damaged newest record", mention: "record 6", rawEdit: func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, recordKey(6))
			v[len(v)-1] ^= 0x01
			rawSet(t, db, recordKey(6), v)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			if tt.rawEdit != nil {
				j := openT(t, dir)
				commitT(t, j, newHistory(9, 6).records...)
				closeT(t, j)
				rawEdit(t, dir, func(db *pebble.DB) { tt.rawEdit(t, db) })
			}
			before := listDir(t, dir)
			j, err := Open(dir, Options{})
			if err == nil {
				j.Close()
				t.Fatalf("Open succeeded")
			}
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrLocked) {
				t.Fatalf("Open error = %v, want ErrCorrupt", err)
			}
			t.Logf("Open: %v", err)
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("Open error %q does not mention %q", err, tt.mention)
			}
			if tt.setup != nil && tt.rawEdit == nil && tt.mention != "" && tt.mention != "hello" {
				// Foreign directories are refused before anything is written.
				if after := listDir(t, dir); !slices.Equal(before, after) {
					t.Errorf("Open changed the directory: %v, was %v", after, before)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestOpenLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	if j2, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		if err == nil {
			j2.Close()
		}
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	closeT(t, j)
	j = openT(t, dir) // released by Close
	if j.Meta().Term != 3 {
		t.Errorf("Term = %d, want 3 (the refused Open must not bump it)", j.Meta().Term)
	}
}

// helperDirEnv names the directory a child test process holds open.
const helperDirEnv = "REVD_JOURNAL_TEST_HOLD_DIR"

// TestHoldOpen is not a test: run as a child process by
// TestOpenLockedByAnotherProcess, it opens the journal, says "ready" and
// holds it until its stdin closes.
func TestHoldOpen(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestOpenLockedByAnotherProcess")
	}
	j, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := j.Close(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

func TestOpenLockedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldOpen$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper process: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper process said %q, %v", line, err)
	}
	if j, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		if err == nil {
			j.Close()
		}
		t.Fatalf("Open while another process holds the directory = %v, want ErrLocked", err)
	}
}
