package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// etcd's logging flags: what etcd refuses revd refuses, with etcd's
// messages; the outputs are written as named, in the format asked for.
func TestLoggingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format=xml"}, "unknown log format: xml, supported values json, console"},
		{[]string{"--log-outputs=default,stdout"}, `multi logoutput for "default" is not supported yet`},
		{[]string{"--logger=capnslog"}, "--logger=capnslog is removed in v3.5"},
		{[]string{"--logger=glog"}, `unknown logger option "glog"`},
	} {
		if _, err := parse(t, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}

	file := filepath.Join(t.TempDir(), "revd.log")
	cfg := mustParse(t, []string{"--log-format=json", "--log-outputs=stdout," + file + ",stdout"}, nil)
	var stdout, stderr bytes.Buffer
	w, closeLogs, err := cfg.log.open(&stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(cfg.log.handler(w, cfg.logLevel)).Info("revd ready", "name", "x")
	closeLogs()
	inFile, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() != 0 || stdout.String() != string(inFile) || strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("stdout %q, file %q, stderr %q: want one line on stdout and in the file", stdout.String(), inFile, stderr.String())
	}
	var line map[string]any
	if err := json.Unmarshal(inFile, &line); err != nil || line["msg"] != "revd ready" || line["name"] != "x" {
		t.Errorf("a JSON line %q: %v, %v", inFile, line, err)
	}
	// Appended to, not truncated, at the next start.
	w, closeLogs, err = cfg.log.open(&stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(cfg.log.handler(w, cfg.logLevel)).Info("again")
	closeLogs()
	if b, _ := os.ReadFile(file); !strings.HasPrefix(string(b), string(inFile)) || strings.Count(string(b), "\n") != 2 {
		t.Errorf("the log file after a second start: %q", b)
	}
}
