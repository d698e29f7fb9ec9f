package agent

import "context"

// W3C trace context on the stdio link. A traced task frame carries the host
// span's "traceparent" (and "tracestate"); a call frame may carry one back,
// and the host parents the call's span on it. The package needs no
// OpenTelemetry: agent code that uses it reads Task.TraceParent and hands
// its own span's context to calls with ContextWithTraceParent.

type traceParentKey struct{}

type traceParent struct{ parent, state string }

// ContextWithTraceParent returns a copy of ctx whose host calls (HostCall,
// CallAgent and the helpers built on them) carry traceparent and tracestate
// instead of the task's own, so the host makes the call's span a child of
// that span. An empty traceparent leaves ctx as it is. The values are sent
// as given.
func ContextWithTraceParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceParentKey{}, traceParent{traceparent, tracestate})
}

// callTraceContext is the trace context a call made for t with ctx carries:
// ctx's (ContextWithTraceParent), else the task's own; empty when neither.
func callTraceContext(ctx context.Context, t *Task) (parent, state string) {
	if tp, ok := ctx.Value(traceParentKey{}).(traceParent); ok {
		return tp.parent, tp.state
	}
	return t.TraceParent, t.TraceState
}

// validTraceParent reports whether s is a W3C traceparent: lowercase hex
// version-traceid-spanid-flags, version not ff, ids not all zero; a version
// after 00 may append fields after a dash.
func validTraceParent(s string) bool {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, spanID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(spanID) || !lowerHex(flags) {
		return false
	}
	if version == "ff" || allZero(traceID) || allZero(spanID) {
		return false
	}
	if len(s) > 55 {
		return version != "00" && s[55] == '-'
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
