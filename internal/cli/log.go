package cli

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger returns a logger writing format (auto: text on a terminal,
// else JSON) at level to w.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q", ErrUsage, level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "auto":
		if IsTerminal(w) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q, want auto|text|json", ErrUsage, format)
}
