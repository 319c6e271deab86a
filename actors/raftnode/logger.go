package raftnode

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// raftLogger is raft's Logger on slog. raft's own info is chatty (every
// message of an election); it goes to Info as raft writes it.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) out(level slog.Level, msg string) { r.l.Log(context.Background(), level, msg) }

func (r raftLogger) Debug(v ...any) { r.out(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.out(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any)                 { r.out(slog.LevelInfo, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.out(slog.LevelInfo, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.out(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.out(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.out(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.out(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any) {
	r.out(slog.LevelError, fmt.Sprint(v...))
	os.Exit(1)
}
func (r raftLogger) Fatalf(format string, v ...any) {
	r.out(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
