package testutil

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// StatusKiB reads field (RssAnon, VmRSS) of /proc/pid/status, in KiB; a
// process or field that is not there fails the test.
func StatusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := StatusField(b, field)
	if !ok {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	return n
}

// StatusField finds "field: N kB" in the text of /proc/pid/status.
func StatusField(status []byte, field string) (int64, bool) {
	i := bytes.Index(status, []byte("\n"+field+":"))
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(status[i+len(field)+2:])
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	return n, err == nil
}
