package journaltool

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
	"revd/projections/statehash"
)

// smallJournal builds, with fixed ids, a data directory whose base snapshot
// is at revision 3 and that holds record 4:
//
//	2: PUT a = "1"
//	3: PUT "b\xff" = "\x00\x01" (lease 5), PUT a = "<&>"
//	4: DELETE a
func smallJournal(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	l, err := journal.NewLoader(dir, journal.LoadMeta{ClusterID: 0x1234, MemberID: 0x5678, BaseRev: 3, CompactRev: 3}, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []*mvccpb.KeyValue{
		{Key: []byte("a"), Value: []byte("<&>"), CreateRevision: 2, ModRevision: 3, Version: 2},
		{Key: []byte("b\xff"), Value: []byte{0, 1}, CreateRevision: 3, ModRevision: 3, Version: 1, Lease: 5},
	} {
		if err := l.AddBase(kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AddRecord(4, []*mvccpb.Event{{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 4}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The JSON lines schema, byte for byte (it is documented in doc.go).
func TestExportJSONLSchema(t *testing.T) {
	dir := smallJournal(t)
	got := string(exportDir(t, dir, ExportOptions{}))
	want := `{"kind":"header","format":"revd-journal-export/v1","cluster_id":4660,"member_id":22136,"snapshot_revision":3,"compact_revision":3,"last_revision":4,"snapshot_keys":2,"prefix_b64":""}
{"kind":"snapshot","key":"a","key_b64":"YQ==","value":"<&>","value_b64":"PCY+","create_revision":2,"mod_revision":3,"version":2,"lease":0}
{"kind":"snapshot","key_b64":"Yv8=","value":"\u0000\u0001","value_b64":"AAE=","create_revision":3,"mod_revision":3,"version":1,"lease":5}
{"kind":"event","revision":4,"type":"DELETE","key":"a","key_b64":"YQ==","value":"","value_b64":"","create_revision":0,"mod_revision":4,"version":0,"lease":0}
`
	if got != want {
		t.Errorf("export:\n%s\nwant:\n%s", got, want)
	}
	// With --from 4 the snapshot is the state at 3, the same as the base.
	if again := string(exportDir(t, dir, ExportOptions{From: 4})); again != want {
		t.Errorf("export --from 4:\n%s\nwant:\n%s", again, want)
	}
	pre := string(exportDir(t, dir, ExportOptions{Prefix: []byte("b")}))
	wantPre := `{"kind":"header","format":"revd-journal-export/v1","cluster_id":4660,"member_id":22136,"snapshot_revision":3,"compact_revision":3,"last_revision":4,"snapshot_keys":1,"prefix":"b","prefix_b64":"Yg=="}
{"kind":"snapshot","key_b64":"Yv8=","value":"\u0000\u0001","value_b64":"AAE=","create_revision":3,"mod_revision":3,"version":1,"lease":5}
`
	if pre != wantPre {
		t.Errorf("export --prefix b:\n%s\nwant:\n%s", pre, wantPre)
	}
}

// export -> import -> export gives the same bytes, in both formats, for
// every way of choosing the revisions; and the imported directory holds the
// history it should.
func TestRoundTrip(t *testing.T) {
	h := newGenHistory(1, 60)
	compacted := filepath.Join(t.TempDir(), "compacted")
	writeJournal(t, compacted, h, 60, 40, 30) // base 30, compaction 40, last 60
	never := filepath.Join(t.TempDir(), "never")
	writeJournal(t, never, h, 25, 0, 0)
	fresh := filepath.Join(t.TempDir(), "fresh")
	writeJournal(t, fresh, h, 0, 0, 0)

	tests := []struct {
		dir                 string
		o                   ExportOptions
		snap, compact, last int64
	}{
		{compacted, ExportOptions{}, 30, 40, 60},
		{compacted, ExportOptions{From: 31}, 30, 40, 60},
		{compacted, ExportOptions{From: 45}, 44, 44, 60},
		{compacted, ExportOptions{To: 50}, 30, 40, 50},
		{compacted, ExportOptions{To: 35}, 30, 35, 35},
		{compacted, ExportOptions{From: 35, To: 38}, 34, 38, 38},
		{compacted, ExportOptions{From: 61}, 60, 60, 60},
		{compacted, ExportOptions{To: 1000}, 30, 40, 60},
		{never, ExportOptions{}, 0, 0, 25},
		{never, ExportOptions{From: 2}, 0, 0, 25},
		{never, ExportOptions{From: 10, To: 20}, 9, 9, 20},
		{fresh, ExportOptions{}, 0, 0, 1},
	}
	for i, tt := range tests {
		for _, f := range []Format{JSONL, Proto} {
			t.Run(fmt.Sprintf("%d/%s/%s/%+v", i, filepath.Base(tt.dir), f, tt.o), func(t *testing.T) {
				o := tt.o
				o.Format = f
				first := exportDir(t, tt.dir, o)
				out := filepath.Join(t.TempDir(), "imported")
				res, err := Import(bytes.NewReader(first), out, BuildOptions{})
				if err != nil {
					t.Fatal(err)
				}
				m := res.Meta
				if m.BaseRev != tt.snap || m.CompactRev != tt.compact || m.LastRev != max(tt.last, 1) {
					t.Errorf("imported meta %+v, want base %d, compact %d, last %d", m, tt.snap, tt.compact, tt.last)
				}
				if want := statehash.OfMap(h.states[max(tt.last, 1)]); res.Hash != want || res.Keys != int64(len(h.states[max(tt.last, 1)])) {
					t.Errorf("imported state hash %s (%d keys), want %s", res.Hash, res.Keys, want)
				}
				second := exportDir(t, out, ExportOptions{Format: f})
				if !bytes.Equal(first, second) {
					t.Fatalf("export of the import differs:\n%q\nwant\n%q", head(second), head(first))
				}
				// The other format carries the same history.
				other := JSONL
				if f == JSONL {
					other = Proto
				}
				o.Format = other
				if a, b := exportDir(t, tt.dir, o), exportDir(t, out, ExportOptions{Format: other}); !bytes.Equal(a, b) {
					t.Errorf("%s export of the %s import differs from the original's", other, f)
				}
			})
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 600)] }

// The proto format is length-delimited ExportHeader, KeyValue, Record
// messages; the records are the journal's payloads.
func TestExportProtoLayout(t *testing.T) {
	dir := smallJournal(t)
	b := exportDir(t, dir, ExportOptions{Format: Proto})
	rd, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if rd.Format() != Proto || rd.Header().SnapshotRev != 3 || rd.Header().SnapshotKeys != 2 || rd.Header().ClusterID != 0x1234 {
		t.Errorf("header %+v, format %v", rd.Header(), rd.Format())
	}
	var keys []string
	for kv, err := range rd.Snapshot() {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(kv.Key))
	}
	var revs []int64
	for rec, err := range rd.Records() {
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rec.Revision)
		payload, _ := journal.MarshalRecord(nil, rec)
		if !bytes.HasSuffix(b, payload) {
			t.Errorf("record %d is not stored as its journal payload", rec.Revision)
		}
	}
	if fmt.Sprint(keys, revs) != "[a b\xff] [4]" {
		t.Errorf("snapshot keys %q, records %v", keys, revs)
	}
}

func TestExportRangeErrors(t *testing.T) {
	h := newGenHistory(2, 40)
	dir := t.TempDir()
	writeJournal(t, dir, h, 40, 20, 20)
	j := openRO(t, dir)
	for _, o := range []ExportOptions{{From: 20}, {From: 5}, {From: 42}, {To: 19}, {From: 30, To: 28}, {From: -1}} {
		var buf bytes.Buffer
		if _, err := Export(&buf, j, o); !errors.Is(err, ErrRange) {
			t.Errorf("Export(%+v) = %v, want ErrRange", o, err)
		} else {
			t.Logf("Export(%+v): %v", o, err)
		}
	}
}

// Import refuses what it cannot load faithfully, and leaves nothing behind.
func TestImportRefuses(t *testing.T) {
	dir := smallJournal(t)
	h := newGenHistory(3, 30)
	big := filepath.Join(t.TempDir(), "big")
	writeJournal(t, big, h, 30, 0, 0)
	good := string(exportDir(t, big, ExportOptions{}))
	lines := strings.SplitAfter(good, "\n")
	goodProto := exportDir(t, big, ExportOptions{Format: Proto})

	tests := []struct {
		name, file, want string
	}{
		{"prefix export", string(exportDir(t, dir, ExportOptions{Prefix: []byte("a")})), "prefix"},
		{"truncated at a line", strings.Join(lines[:len(lines)-3], ""), "the header says 30 (is the file truncated?)"},
		{"truncated proto", string(goodProto[:len(goodProto)-5]), "unexpected EOF"},
		{"not an export", "hello\n", "not an export"},
		{"empty", "", "empty file"},
		{"version jump", strings.Replace(good, `"value":"c@4","value_b64":"Y0A0","create_revision":4,"mod_revision":4,"version":1`,
			`"value":"c@4","value_b64":"Y0A0","create_revision":4,"mod_revision":4,"version":3`, 1),
			`revision 4, key "c": PUT creating the key with version 3, want 1`},
		{"key disagrees", strings.Replace(good, `"key":"a","key_b64":"YQ=="`, `"key":"x","key_b64":"YQ=="`, 1), `key "x" disagrees with key_b64`},
		{"unknown field", strings.Replace(good, `"lease":0}`, `"lease":0,"extra":1}`, 1), `unknown field "extra"`},
		{"other format", strings.Replace(good, "revd-journal-export/v1", "revd-journal-export/v9", 1), "format"},
		{"revision missing", strings.Join(append(lines[:7:7], lines[9:]...), ""), "revision 6 follows revision 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			_, err := Import(strings.NewReader(tt.file), filepath.Join(parent, "out"), BuildOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Import error = %v, want one containing %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("a refused import left %d entries behind", len(entries))
			}
		})
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(strings.NewReader(good), full, BuildOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Import into a non-empty directory = %v, want fs.ErrExist", err)
	}
}
