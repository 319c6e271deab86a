package report

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc"); got != "a b c" {
		t.Errorf("oneLine joined %q", got)
	}
	// An overlong line is cut before a whole character, never inside one.
	long := strings.Repeat("µ", maxLine)
	got := oneLine(long)
	if len(got) > maxLine || len(got) < maxLine-6 || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("cut line: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-5:])
	}
	short := strings.Repeat("x", maxLine)
	if oneLine(short) != short {
		t.Error("a line of maxLine bytes was cut")
	}
}
