package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// revd's logs, configured with etcd's logging flags: --log-level,
// --log-format (json or console: slog's JSON or text handler; revd's
// default is console) and --log-outputs (comma-separated: default and
// stderr are standard error, stdout standard output, anything else a file
// opened for appending, created if missing; systemd/journal is standard
// error, where systemd collects it, as etcd falls back to when journald is
// not there). --logger takes etcd's one value, zap.

// The --log-format values (etcd's logutil.JSONLogFormat and
// ConsoleLogFormat) and the --log-outputs keywords.
const (
	logFormatJSON    = "json"
	logFormatConsole = "console"

	logOutputDefault = "default"
	logOutputStderr  = "stderr"
	logOutputStdout  = "stdout"
	logOutputJournal = "systemd/journal"
)

// logConfig is what the logging flags say.
type logConfig struct {
	format  string
	outputs []string
}

// check refuses what etcd refuses, with etcd's messages.
func (lc logConfig) check(logger string) error {
	switch logger {
	case "zap":
	case "capnslog":
		return errors.New("--logger=capnslog is removed in v3.5")
	default:
		return fmt.Errorf("unknown logger option %q", logger)
	}
	switch lc.format {
	case "", logFormatJSON, logFormatConsole:
	default:
		return fmt.Errorf("unknown log format: %s, supported values json, console", lc.format)
	}
	if len(lc.outputs) > 1 {
		for _, o := range lc.outputs {
			if o == logOutputDefault {
				return fmt.Errorf("multi logoutput for %q is not supported yet", logOutputDefault)
			}
		}
	}
	return nil
}

// open returns the writer the logs go to (and a function closing the files
// it opened); stdout and stderr are the process's.
func (lc logConfig) open(stdout, stderr io.Writer) (io.Writer, func(), error) {
	var ws []io.Writer
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	seen := map[string]bool{}
	for _, o := range lc.outputs {
		if seen[o] {
			continue
		}
		seen[o] = true
		switch o {
		case logOutputDefault, logOutputStderr, logOutputJournal:
			ws = append(ws, stderr)
		case logOutputStdout:
			ws = append(ws, stdout)
		default:
			f, err := os.OpenFile(o, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("--log-outputs: %w", err)
			}
			files = append(files, f)
			ws = append(ws, f)
		}
	}
	switch len(ws) {
	case 0:
		return stderr, closeAll, nil
	case 1:
		return ws[0], closeAll, nil
	}
	return io.MultiWriter(ws...), closeAll, nil
}

// handler is the slog handler for w at level.
func (lc logConfig) handler(w io.Writer, level slog.Level) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if lc.format == logFormatJSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}
