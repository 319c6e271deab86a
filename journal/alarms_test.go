package journal

import (
	"errors"
	"slices"
	"testing"
)

// TestAlarmsDurable: alarms set are read back after a reopen, in order;
// an empty list clears them; a damaged value is ErrCorrupt.
func TestAlarmsDurable(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	if got, err := j.Alarms(); err != nil || got != nil {
		t.Fatalf("fresh journal: %v, %v", got, err)
	}
	want := []Alarm{{MemberID: 7, Type: 2}, {MemberID: 1 << 63, Type: 1}}
	if err := setAlarms(j, want); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir)
	if got, err := j.Alarms(); err != nil || !slices.Equal(got, want) {
		t.Fatalf("after reopen: %v, %v; want %v", got, err, want)
	}
	if err := setAlarms(j, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Alarms(); err != nil || len(got) != 0 {
		t.Fatalf("cleared: %v, %v", got, err)
	}
	for _, v := range [][]byte{{1, 2}, {0, 0, 0, 0, 1}, {9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2}} {
		if _, err := decodeAlarms(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %v: %v, want ErrCorrupt", v, err)
		}
	}
}
