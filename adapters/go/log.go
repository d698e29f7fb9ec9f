package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"
)

// frameHandler is a slog.Handler that writes records as log frames. Before
// the welcome, and after the link closes, it writes text lines to stderr.
type frameHandler struct {
	agent  *Agent
	s      *session // nil: use the agent's current session
	taskID string
	logger string
	fields map[string]any
	groups []string
}

func (h *frameHandler) session() *session {
	if h.s != nil {
		return h.s
	}
	if h.agent != nil {
		return h.agent.current.Load()
	}
	return nil
}

func (h *frameHandler) Enabled(_ context.Context, l slog.Level) bool {
	if s := h.session(); s != nil {
		return l >= slog.Level(s.level.Load())
	}
	return l >= slog.LevelInfo
}

func (h *frameHandler) Handle(_ context.Context, r slog.Record) error {
	fields := cloneFields(h.fields)
	target := nest(fields, h.groups)
	r.Attrs(func(a slog.Attr) bool {
		addAttr(target, a)
		return true
	})
	if len(fields) == 0 {
		fields = nil
	}
	s := h.session()
	if s != nil && s.linkUp() {
		err := s.w.send(logFrame{Type: "log", Level: levelName(r.Level), Msg: r.Message, Fields: fields, TaskID: h.taskID, Logger: h.logger})
		if err == nil {
			return nil
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", strings.ToUpper(levelName(r.Level)), r.Message)
	if h.taskID != "" {
		fmt.Fprintf(&b, " task_id=%s", h.taskID)
	}
	if len(fields) > 0 {
		js, _ := json.Marshal(fields)
		fmt.Fprintf(&b, " %s", js)
	}
	b.WriteByte('\n')
	_, err := fmt.Fprint(os.Stderr, b.String())
	return err
}

func (h *frameHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.fields = cloneFields(h.fields)
	target := nest(c.fields, h.groups)
	for _, a := range attrs {
		addAttr(target, a)
	}
	return &c
}

func (h *frameHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = append(h.groups[:len(h.groups):len(h.groups)], name)
	return &c
}

func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warning"
	}
	return "error"
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warning", "warn":
		return slog.LevelWarn
	case "error", "critical":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func cloneFields(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = cloneFields(sub)
		}
		c[k] = v
	}
	return c
}

// nest returns the map at the group path, creating it.
func nest(m map[string]any, groups []string) map[string]any {
	for _, g := range groups {
		sub, ok := m[g].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[g] = sub
		}
		m = sub
	}
	return m
}

func addAttr(m map[string]any, a slog.Attr) {
	v := a.Value.Resolve()
	if a.Key == "" && v.Kind() != slog.KindGroup {
		return
	}
	if v.Kind() == slog.KindGroup {
		target := m
		if a.Key != "" {
			target = nest(m, []string{a.Key})
		}
		for _, ga := range v.Group() {
			addAttr(target, ga)
		}
		return
	}
	m[a.Key] = attrValue(v)
}

func attrValue(v slog.Value) any {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindAny:
		x := v.Any()
		if err, ok := x.(error); ok {
			return err.Error()
		}
		if m, ok := x.(map[string]any); ok {
			return maps.Clone(m)
		}
		if _, err := json.Marshal(x); err != nil {
			return fmt.Sprint(x)
		}
		return x
	}
	return v.Any()
}
