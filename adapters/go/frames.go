package agent

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The protocol versions this package speaks, highest last.
var supportedVersions = []int{1}

// Frames the agent writes. Field names are the proto field names of
// proto/ether/adapter/v1/frames.proto.

type helloFrame struct {
	Type         string       `json:"type"`
	Protocol     int          `json:"protocol"`
	Agent        identity     `json:"agent"`
	Actions      []actionInfo `json:"actions"`
	Capabilities capabilities `json:"capabilities"`
	PID          int          `json:"pid"`
}

type identity struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Language    string   `json:"language"`
	Runtime     string   `json:"runtime"`
	Description string   `json:"description,omitempty"`
	Kind        string   `json:"kind,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

type actionInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	ParamsSchema json.RawMessage `json:"params_schema,omitempty"`
	Idempotent   bool            `json:"idempotent,omitempty"`
	CacheTTL     float64         `json:"cache_ttl,omitempty"` // seconds
}

type capabilities struct {
	MaxConcurrency int      `json:"max_concurrency"`
	Cancel         bool     `json:"cancel"`
	Progress       bool     `json:"progress"`
	Ping           bool     `json:"ping"`
	Calls          []string `json:"calls"`
	MaxFrame       int64    `json:"max_frame"`
}

type resultFrame struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       *errorBody      `json:"error,omitempty"`
	Metadata    *resultMetadata `json:"metadata,omitempty"`
	NextActions []NextAction    `json:"next_actions,omitempty"`
}

// legacyResultFrame answers the seeds' minimal envelope.
type legacyResultFrame struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

type resultMetadata struct {
	Cost  float64        `json:"cost,omitempty"`
	Model string         `json:"model,omitempty"`
	Extra map[string]any `json:"extra,omitempty"`
}

type progressFrame struct {
	Type     string  `json:"type"`
	ID       string  `json:"id"`
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

type logFrame struct {
	Type   string         `json:"type"`
	Level  string         `json:"level"`
	Msg    string         `json:"msg"`
	Fields map[string]any `json:"fields,omitempty"`
	TaskID string         `json:"task_id,omitempty"`
	Logger string         `json:"logger,omitempty"`
}

type callFrame struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	Method      string          `json:"method"`
	Params      json.RawMessage `json:"params"`
	TaskID      string          `json:"task_id,omitempty"`
	DeadlineMS  int64           `json:"deadline_ms,omitempty"`
	TraceParent string          `json:"traceparent,omitempty"`
	TraceState  string          `json:"tracestate,omitempty"`
}

type cancelFrame struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

type pongFrame struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type fatalFrame struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NextAction is a follow-up an agent proposes with its result.
type NextAction struct {
	Agent  string `json:"agent"`
	Action string `json:"action"`
	Params any    `json:"params,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Trace places a task in a tree of tasks.
type Trace struct {
	RootID   string `json:"root_id"`
	ParentID string `json:"parent_id"`
	Depth    int    `json:"depth"`
}

// rawFrame is a frame the host wrote, decoded one field at a time so that
// one odd field never loses the whole frame (and its id).
type rawFrame map[string]json.RawMessage

func parseFrame(line []byte) (rawFrame, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, false
	}
	var f rawFrame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, false
	}
	return f, true
}

// str returns field k when it is a JSON string, else "".
func (f rawFrame) str(k string) string {
	var s string
	if v, ok := f[k]; ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}

// num returns field k as an integer; proto3 JSON may write int64 as a
// string, so both forms are accepted.
func (f rawFrame) num(k string) int64 {
	v, ok := f[k]
	if !ok {
		return 0
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		if i, err := n.Int64(); err == nil {
			return i
		}
		if x, err := n.Float64(); err == nil {
			return int64(x)
		}
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	}
	return 0
}

// raw returns field k, or nil when it is absent or null.
func (f rawFrame) raw(k string) json.RawMessage {
	v, ok := f[k]
	if !ok || string(v) == "null" {
		return nil
	}
	return v
}

func (f rawFrame) has(k string) bool { _, ok := f[k]; return ok }

// encodeFrame encodes v as one compact JSON line ending in '\n', leaving
// <, > and & unescaped.
func encodeFrame(v any) ([]byte, error) {
	if r, ok := v.(resultFrame); ok {
		if b, ok := r.plain(); ok {
			return b, nil
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// marshalValue encodes a handler's result value.
func marshalValue(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null"), nil
		}
		if !json.Valid(raw) {
			return nil, errInvalidRaw
		}
		return raw, nil
	}
	b, err := encodeFrame(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// plain writes the usual result frame, a status and a result and nothing else,
// without encoding/json, which validates and compacts a RawMessage again on
// every Marshal though marshalValue has just checked it: for a 1 KB result that
// was most of what the frame cost. ok is false for any other frame, and for a
// result holding a line break (valid JSON may; a frame must stay one line).
func (r resultFrame) plain() (b []byte, ok bool) {
	if r.Error != nil || r.Metadata != nil || len(r.NextActions) > 0 ||
		bytes.ContainsAny(r.Result, "\r\n") || !plainString(r.ID) || !plainString(r.Status) {
		return nil, false
	}
	b = make([]byte, 0, len(r.Result)+len(r.ID)+64)
	b = append(b, `{"type":"result","id":"`...)
	b = append(b, r.ID...)
	b = append(b, `","status":"`...)
	b = append(b, r.Status...)
	b = append(b, '"')
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, r.Result...)
	}
	return append(b, '}', '\n'), true
}

// plainString reports whether s needs no escaping inside a JSON string.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
