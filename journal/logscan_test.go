package journal

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/prometheus/client_golang/prometheus"
)

// Pure tests of scanLog on logs written by Pebble's own writers
// (record.LogWriter for WALs, record.Writer for the MANIFEST) into memory.

// memLog is a log file in memory: what was written, and what was synced.
type memLog struct {
	mu     sync.Mutex
	data   []byte
	synced int
}

func (f *memLog) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, p...)
	return len(p), nil
}

func (f *memLog) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = len(f.data)
	return nil
}

func (f *memLog) Close() error { return nil }

const testLogNum = 7

// testWAL is a WAL written by Pebble's LogWriter with sync offsets: the
// records synced one by one (each is a commit acknowledged), then unsynced
// ones, then, if closed, the EOF trailer. offsets[i] is where record i
// starts.
type testWAL struct {
	data    []byte
	offsets []int64
	ends    []int64
}

func writeTestWAL(t *testing.T, payloads [][]byte, unsynced [][]byte, closed bool) testWAL {
	t.Helper()
	f := &memLog{}
	w := record.NewLogWriter(f, testLogNum, walConfig())
	var tw testWAL
	for _, p := range payloads {
		tw.offsets = append(tw.offsets, w.Size())
		var wg sync.WaitGroup
		var err error
		wg.Add(1)
		if _, err2 := w.SyncRecord(p, &wg, &err); err2 != nil {
			t.Fatal(err2)
		}
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		tw.ends = append(tw.ends, w.Size())
	}
	for _, p := range unsynced {
		tw.offsets = append(tw.offsets, w.Size())
		if _, err := w.WriteRecord(p); err != nil {
			t.Fatal(err)
		}
		tw.ends = append(tw.ends, w.Size())
	}
	if closed {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		if len(unsynced) > 0 {
			// Have the flusher write the unsynced records: an empty
			// record, synced, which says the log was synced up to the
			// synced records only.
			var wg sync.WaitGroup
			var err error
			wg.Add(1)
			if _, err2 := w.SyncRecord(nil, &wg, &err); err2 != nil {
				t.Fatal(err2)
			}
			wg.Wait()
		}
		defer w.Close() // after the copy below: no trailer
	}
	f.mu.Lock()
	tw.data = append(bytes.Clone(f.data), make([]byte, 3*logBlock)...) // walFS's zeroed tail
	f.mu.Unlock()
	return tw
}

// walConfig is the LogWriter's configuration in a Pebble store of revd's
// format: sync offsets written (the writer records them only when it has
// a latency histogram to report to, as a DB gives it).
func walConfig() record.LogWriterConfig {
	return record.LogWriterConfig{
		WriteWALSyncOffsets: func() bool { return true },
		WALFsyncLatency:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test"}),
	}
}

// payloads returns n records of size bytes with no zero byte in them, so
// that a damaged one never reads as torn by chance.
func payloads(n, size int) [][]byte {
	var out [][]byte
	for i := range n {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		p[0] = byte(1 + i%250)
		out = append(out, p)
	}
	return out
}

func TestScanLogCleanAndCrashed(t *testing.T) {
	for _, closed := range []bool{true, false} {
		tw := writeTestWAL(t, payloads(300, 700), nil, closed)
		s := scanLog(tw.data, logNewestWAL, testLogNum)
		if s.Damage != "" || s.Records < 300 {
			t.Fatalf("closed=%v: %+v", closed, s)
		}
		if closed != s.Trailer {
			t.Errorf("closed=%v: Trailer = %v", closed, s.Trailer)
		}
		if !closed && (!s.Torn || s.Why != "zeroed header") {
			t.Errorf("crashed: %+v, want a torn end at the zeroed tail", s)
		}
		if s := scanLog(tw.data, logOlderWAL, testLogNum); closed != (s.Damage == "") {
			t.Errorf("closed=%v, as an older WAL: %+v", closed, s)
		}
	}
}

// A byte flipped in any synced record is damage; for all but the last
// two, a later chunk says the log was synced past it (the writer may still
// stamp the chunk after a synced one with the sync before). Pebble's own
// reader finds that only when the later chunk is in a later 32 KiB block.
func TestScanLogFindsSyncedDamage(t *testing.T) {
	tw := writeTestWAL(t, payloads(200, 500), nil, false)
	pebbleMissed := 0
	for i := range 200 {
		data := bytes.Clone(tw.data)
		data[tw.offsets[i]+30] ^= 0x08
		s := scanLog(data, logNewestWAL, testLogNum)
		if s.Damage == "" || (i < 198 && !strings.Contains(s.Damage, "synced")) {
			t.Fatalf("record %d damaged: %+v", i, s)
		}
		if n := pebbleReads(data); n >= 0 && n <= i {
			pebbleMissed++
		}
	}
	if pebbleMissed == 0 {
		t.Errorf("Pebble's reader found every damaged record; this test no longer shows what scanLog adds")
	}
	t.Logf("Pebble's reader took %d of 200 damaged records for the end of the log", pebbleMissed)
}

// pebbleReads is how many records Pebble's reader returns before it stops
// without reporting corruption; -1 if it reports corruption.
func pebbleReads(data []byte) int {
	r := record.NewReader(bytes.NewReader(data), testLogNum)
	n := 0
	for {
		rr, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rr)
		}
		switch {
		case err == nil:
			n++
		case errors.Is(err, io.EOF), errors.Is(err, record.ErrUnexpectedEOF):
			return n
		default:
			return -1
		}
	}
}

func TestScanLogLastRecord(t *testing.T) {
	tw := writeTestWAL(t, payloads(40, 1500), nil, false)
	last := len(tw.offsets) - 1
	start, end := tw.offsets[last], tw.ends[last]
	tests := []struct {
		name   string
		damage func(d []byte) []byte
		torn   bool
	}{
		{"byte flipped", func(d []byte) []byte { d[start+100] ^= 1; return d }, false},
		{"byte zeroed", func(d []byte) []byte { d[start+100] = 0; return d }, false},
		{"sectors after the first never written", func(d []byte) []byte {
			clear(d[(start/sectorLen+1)*sectorLen : end])
			return d
		}, true},
		{"header never written", func(d []byte) []byte { clear(d[start:end]); return d }, true},
		{"file cut where a sector ends", func(d []byte) []byte { return d[:(start/sectorLen+1)*sectorLen] }, true},
		{"file cut elsewhere", func(d []byte) []byte { return d[:start+201] }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scanLog(tt.damage(bytes.Clone(tw.data)), logNewestWAL, testLogNum)
			if s.Stop > start || s.Records != last {
				t.Fatalf("%+v: want the log to stop at record %d (offset %d)", s, last, start)
			}
			if tt.torn != (s.Damage == "") || tt.torn != s.Torn {
				t.Errorf("%+v: want torn %v", s, tt.torn)
			}
		})
	}
}

// Records written but not synced when the machine stopped may reach the
// disk in any order: a hole among them is a torn end, not damage.
func TestScanLogUnsyncedHole(t *testing.T) {
	tw := writeTestWAL(t, payloads(20, 900), payloads(30, 900), false)
	hole := tw.offsets[25]
	data := bytes.Clone(tw.data)
	clear(data[hole/sectorLen*sectorLen : (hole/sectorLen+3)*sectorLen])
	s := scanLog(data, logNewestWAL, testLogNum)
	if s.Damage != "" || !s.Torn || s.Records < 20 {
		t.Errorf("%+v: want a torn end after the 20 synced records", s)
	}
}

// A WAL file Pebble recycled holds an older log after the new one's end:
// that is the end of the log, not damage.
func TestScanLogRecycledTail(t *testing.T) {
	old := &memLog{}
	w := record.NewLogWriter(old, testLogNum-3, walConfig())
	for _, p := range payloads(100, 800) {
		if _, err := w.WriteRecord(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tw := writeTestWAL(t, payloads(10, 800), nil, false)
	n := tw.ends[len(tw.ends)-1]
	data := append(bytes.Clone(tw.data[:n]), old.data[n:]...)
	s := scanLog(data, logNewestWAL, testLogNum)
	if s.Damage != "" || !s.Torn || s.Records < 10 {
		t.Errorf("%+v: want the end of the log after 10 records", s)
	}
}

func TestScanLogManifest(t *testing.T) {
	var buf bytes.Buffer
	w := record.NewWriter(&buf)
	var offsets []int64
	for _, p := range payloads(5, 700) {
		offsets = append(offsets, w.Size())
		if _, err := w.WriteRecord(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	clean := buf.Bytes()
	if s := scanLog(clean, logManifest, 0); s.Damage != "" || s.Records != 5 || s.Why != "" {
		t.Fatalf("clean manifest: %+v", s)
	}
	for i, off := range offsets {
		data := bytes.Clone(clean)
		data[off+50] ^= 0x40
		s := scanLog(data, logManifest, 0)
		if s.Damage == "" || s.Records != i {
			t.Errorf("edit %d damaged: %+v", i, s)
		}
	}
	if s := scanLog(clean[:offsets[4]+20], logManifest, 0); s.Damage == "" {
		t.Errorf("manifest cut inside its last edit: %+v, want damage", s)
	}
	data := bytes.Clone(clean)
	clear(data[(offsets[4]/sectorLen+1)*sectorLen:])
	if s := scanLog(data, logManifest, 0); s.Damage != "" || !s.Torn || s.Records != 4 {
		t.Errorf("manifest whose last edit was never written: %+v, want a torn end", s)
	}
}

func TestHasZeroSector(t *testing.T) {
	d := bytes.Repeat([]byte{1}, 3*sectorLen)
	if hasZeroSector(d, 10, int64(len(d))) {
		t.Error("no zeroes")
	}
	d[sectorLen*2] = 0
	d[sectorLen*2+1] = 0
	if !hasZeroSector(d, 10, sectorLen*2+2) {
		t.Error("a piece of two zeroes after a sector boundary")
	}
	if hasZeroSector(d, 10, sectorLen*2+3) {
		t.Error("that piece now holds a non-zero byte")
	}
}
