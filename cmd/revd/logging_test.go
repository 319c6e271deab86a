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

// --enable-log-rotation: etcd's checks of the outputs and of the JSON, and
// a file that grows past maxsize is set aside under a timestamped name and
// started again.
func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "revd.log")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--enable-log-rotation"}, "--log-outputs requires a single file path when --log-rotate-config-json is defined"},
		{[]string{"--enable-log-rotation", "--log-outputs=stdout"}, "--log-outputs requires a single file path"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + file + "," + file + ".2"}, "--log-outputs requires a single file path"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + file, "--log-rotation-config-json={maxsize: 1}"}, "improperly formatted log rotation config: invalid character 'm'"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + file, "--log-rotation-config-json="}, "improperly formatted log rotation config: unexpected end of JSON input"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + file, `--log-rotation-config-json={"maxsize": "1"}`}, "invalid log rotation config: json: cannot unmarshal string into Go struct field logRotationConfig.Logger.maxsize of type int"},
	} {
		if _, err := parse(t, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// Without --enable-log-rotation the JSON is not read, as in etcd; with
	// it, two outputs that are not files pass etcd's check.
	mustParse(t, []string{"--log-rotation-config-json=nonsense"}, nil)
	mustParse(t, []string{"--enable-log-rotation", "--log-outputs=stderr,stdout"}, nil)

	cfg := mustParse(t, []string{"--enable-log-rotation", "--log-outputs=stderr," + file, `--log-rotation-config-json={"maxsize": 1, "maxbackups": 5}`}, nil)
	var stdout, stderr bytes.Buffer
	w, closeLogs, err := cfg.log.open(&stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the log file is not created at start: %v", err)
	}
	log := slog.New(cfg.log.handler(w, cfg.logLevel))
	pad := strings.Repeat("x", 1000)
	for i := range 1500 { // about 1.5 MB
		log.Info("line", "i", i, "pad", pad)
	}
	closeLogs()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > 1<<20 {
			t.Errorf("%s holds %d bytes, over maxsize", name, info.Size())
		}
		names[i] = filepath.Base(name)
	}
	if len(names) != 2 || names[1] != "revd.log" || !strings.HasPrefix(names[0], "revd-") || !strings.HasSuffix(names[0], ".log") {
		t.Fatalf("files after 1.5 MB with maxsize 1: %v, want a timestamped backup and revd.log", names)
	}
	if n := strings.Count(stderr.String(), "\n"); n != 1500 {
		t.Errorf("stderr got %d lines, want every one of 1500", n)
	}
}
