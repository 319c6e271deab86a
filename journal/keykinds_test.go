package journal

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// CheckKeys checks each entry by its kind (keyKinds) and names what is
// damaged or foreign; records and base entries are left to Scan and
// ScanBase.
func TestCheckKeys(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	b := j.NewBatch()
	b.AppendRecord(2, newHistory(3, 2).records[0].Events)
	b.PutLease(7, 60)
	b.SetAlarms([]Alarm{{MemberID: 1, Type: 2}})
	b.SetApplied(Applied{Index: 9, Term: 3})
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	ro, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for err := range ro.CheckKeys() {
		t.Errorf("sound store: %v", err)
	}
	closeT(t, ro)

	rawEdit(t, dir, func(db *pebble.DB) {
		for _, k := range [][]byte{leaseKey(7), keyAlarms, keyApplied} {
			v := rawGet(t, db, k)
			v[len(v)-1] ^= 0x01
			rawSet(t, db, k, v)
		}
		rawSet(t, db, []byte("m/unknown"), []byte("x"))
		rawSet(t, db, []byte("zz"), []byte("x"))
		v := rawGet(t, db, recordKey(2)) // a damaged record is Scan's, not CheckKeys'
		v[len(v)-1] ^= 0x01
		rawSet(t, db, recordKey(2), v)
	})
	ro, problems, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatalf("Inspect: %v, %v", problems, err)
	}
	defer ro.Close()
	var got []string
	for err := range ro.CheckKeys() {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("CheckKeys: %v", err)
		}
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"lease", "alarms", "m/applied", `unknown meta key "m/unknown"`, `Pebble key "zz"`} {
		if !strings.Contains(all, want) {
			t.Errorf("CheckKeys found:\n%s\nnothing about %s", all, want)
		}
	}
	if len(got) != 5 {
		t.Errorf("CheckKeys found %d problems, want 5:\n%s", len(got), all)
	}
}
