package progress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlainOutput(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := New(f, 12)
	d.Start("first", func() (int64, int64) { return 1, 2 })
	d.Logf("note %d", 7)
	d.End("ok")
	d.Start("second", nil)
	d.End("FAILED")
	d.Close()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{"[ 1/12] first ...", "note 7", "[ 1/12] first: ok (", "[ 2/12] second ...", "[ 2/12] second: FAILED ("}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s", b)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if strings.Contains(string(b), "\x1b") {
		t.Error("escape sequences written to a file")
	}
}
