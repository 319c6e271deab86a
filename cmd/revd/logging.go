package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"gopkg.in/natefinch/lumberjack.v2"
)

// revd's logs, configured with etcd's logging flags: --log-level,
// --log-format (json or console: slog's JSON or text handler; revd's
// default is console) and --log-outputs (comma-separated: default and
// stderr are standard error, stdout standard output, anything else a file
// opened for appending, created if missing; systemd/journal is standard
// error, where systemd collects it, as etcd falls back to when journald is
// not there). --logger takes etcd's one value, zap.
//
// --enable-log-rotation hands the file output to lumberjack, as etcd does,
// configured by --log-rotation-config-json (its JSON fields: maxsize in
// MB, maxage in days, maxbackups, localtime, compress): the file is renamed
// with a timestamp once it would grow past maxsize and a new one started.
// As in etcd, rotation needs exactly one file among the outputs (or at
// least two outputs; etcd's check lets stderr,stdout through, and nothing
// is rotated then).

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

// defaultLogRotation is etcd's --log-rotation-config-json default.
const defaultLogRotation = `{"maxsize": 100, "maxage": 0, "maxbackups": 0, "localtime": false, "compress": false}`

// errLogRotationOutput is etcd's ErrLogRotationInvalidLogOutput.
var errLogRotationOutput = errors.New("--log-outputs requires a single file path when --log-rotate-config-json is defined")

// logConfig is what the logging flags say.
type logConfig struct {
	format  string
	outputs []string
	// rotate is --enable-log-rotation; rotation its configuration, read
	// from --log-rotation-config-json by check.
	rotate     bool
	rotateJSON string
	rotation   logRotationConfig
}

// logRotationConfig is the rotation configuration; the name and shape are
// etcd's, so a value of the wrong type is refused with etcd's words.
type logRotationConfig struct {
	*lumberjack.Logger
}

// check refuses what etcd refuses, with etcd's messages.
func (lc *logConfig) check(logger string) error {
	switch logger {
	case "zap":
	case "capnslog":
		return errors.New("--logger=capnslog is removed in v3.5")
	default:
		return fmt.Errorf("unknown logger option %q", logger)
	}
	if len(lc.outputs) > 1 {
		for _, o := range lc.outputs {
			if o == logOutputDefault {
				return fmt.Errorf("multi logoutput for %q is not supported yet", logOutputDefault)
			}
		}
	}
	if lc.rotate {
		if err := lc.checkRotation(); err != nil {
			return err
		}
	}
	switch lc.format {
	case "", logFormatJSON, logFormatConsole:
	default:
		return fmt.Errorf("unknown log format: %s, supported values json, console", lc.format)
	}
	return nil
}

// checkRotation is etcd's setupLogRotation: one file among the outputs,
// and a configuration that reads as JSON of the right types (kept in
// lc.rotation).
func (lc *logConfig) checkRotation() error {
	files := 0
	for _, o := range lc.outputs {
		switch o {
		case logOutputDefault, logOutputStderr, logOutputStdout:
		default:
			files++
		}
	}
	if len(lc.outputs) == 1 && files == 0 || files > 1 {
		return errLogRotationOutput
	}
	lc.rotation = logRotationConfig{}
	if err := json.Unmarshal([]byte(lc.rotateJSON), &lc.rotation); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &syntaxErr):
			return fmt.Errorf("improperly formatted log rotation config: %w", err)
		case errors.As(err, &typeErr):
			return fmt.Errorf("invalid log rotation config: %w", err)
		default:
			return fmt.Errorf("fail to unmarshal log rotation config: %w", err)
		}
	}
	return nil
}

// open returns the writer the logs go to (and a function closing the files
// it opened); stdout and stderr are the process's.
func (lc logConfig) open(stdout, stderr io.Writer) (io.Writer, func(), error) {
	var ws []io.Writer
	var files []io.Closer
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
			if lc.rotate {
				// lumberjack opens (or rotates) the file at the first
				// write; open it now so that a path that cannot be
				// written fails the start, as a plain file does.
				l := &lumberjack.Logger{Filename: o}
				if r := lc.rotation.Logger; r != nil {
					l.MaxSize, l.MaxAge, l.MaxBackups = r.MaxSize, r.MaxAge, r.MaxBackups
					l.LocalTime, l.Compress = r.LocalTime, r.Compress
				}
				if _, err := l.Write(nil); err != nil {
					return nil, nil, fmt.Errorf("--log-outputs: %w", err)
				}
				files = append(files, l)
				ws = append(ws, l)
				continue
			}
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
