package system

import (
	"context"
	"log/slog"
)

// minLevelHandler passes on only records at or above min: protoactor logs
// every actor start and stop at info level, which revd keeps quiet.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{h.Handler.WithGroup(name), h.min}
}

func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(minLevelHandler{l.Handler(), slog.LevelWarn}).With("component", "actor")
}
