package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// invoke runs the handler; a panic becomes an "internal" error with the
// stack in data.traceback.
func (s *session) invoke(ac *action, t *Task) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := string(debug.Stack())
			s.warn("panic in action %s (task %s): %v\n%s", ac.name, t.ID, p, stack)
			err = &Error{
				Code:    CodeInternal,
				Message: fmt.Sprintf("panic: %v", p),
				Data:    map[string]any{"traceback": stack},
			}
		}
	}()
	return ac.handler(t.ctx, t)
}

// finish writes the task's one result and releases its slot.
func (s *session) finish(t *Task, v any, err error) {
	if t.done.CompareAndSwap(false, true) {
		s.writeResult(t, s.resultFrame(t, v, err))
	}
	s.mu.Lock()
	delete(s.tasks, t.ID)
	s.inflight--
	s.checkIdleLocked()
	s.mu.Unlock()
	t.cancel(nil)
}

func (s *session) resultFrame(t *Task, v any, err error) resultFrame {
	var out *Output
	switch o := v.(type) {
	case Output:
		out = &o
	case *Output:
		out = o
	}
	r := resultFrame{Type: "result", ID: t.ID, Metadata: t.metadata()}
	if out != nil {
		r.NextActions = out.NextActions
		v = out.Data
		if err == nil && out.Err != nil && !out.Partial {
			err = out.Err
		}
	}
	if err != nil {
		r.Status, r.Error = "error", s.errorBody(t, err)
		return r
	}
	raw, merr := marshalValue(v)
	if merr != nil {
		r.Status, r.Error = "error", &errorBody{Code: CodeInternal, Message: "the result does not encode as JSON: " + merr.Error()}
		return r
	}
	r.Status, r.Result = "ok", raw
	if out != nil && out.Partial {
		r.Status = "partial"
		if out.Err != nil {
			r.Error = s.errorBody(t, out.Err)
		}
	}
	return r
}

func (s *session) errorBody(t *Task, err error) *errorBody {
	var e *Error
	if errors.As(err, &e) {
		return bodyOf(e)
	}
	if t.ctx != nil && t.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		cause := context.Cause(t.ctx)
		var cc *cancelCause
		switch {
		case errors.Is(cause, errDeadline):
			return &errorBody{Code: CodeTimeout, Message: cause.Error()}
		case errors.As(cause, &cc):
			return &errorBody{Code: CodeCancelled, Message: cc.Error()}
		default:
			return &errorBody{Code: CodeCancelled, Message: cause.Error()}
		}
	}
	return &errorBody{Code: CodeInternal, Message: err.Error()}
}

// reject answers a task that never ran.
func (s *session) reject(t *Task, e *Error) {
	s.writeResult(t, resultFrame{Type: "result", ID: t.ID, Status: "error", Error: bodyOf(e)})
}

// writeResult writes r, or a frame_too_large error in its place.
func (s *session) writeResult(t *Task, r resultFrame) {
	err := s.w.send(r)
	var tl *tooLargeError
	if errors.As(err, &tl) {
		s.warn("the result of task %s is too large (%v)", t.ID, err)
		e := &errorBody{Code: CodeFrameTooLarge, Message: tl.Error(), Data: map[string]any{"size": tl.size, "max_frame": tl.max}}
		err = s.w.send(resultFrame{Type: "result", ID: r.ID, Status: "error", Error: e})
	}
	if err != nil && !s.w.broken.Load() {
		s.warn("cannot write the result of task %s: %v", t.ID, err)
	}
}

// abandonStuck answers the tasks whose handlers ignored their cancelled
// context, so every task still gets exactly one result before the exit.
func (s *session) abandonStuck() {
	s.mu.Lock()
	stuck := make([]*Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		stuck = append(stuck, t)
	}
	s.mu.Unlock()
	for _, t := range stuck {
		if t.done.CompareAndSwap(false, true) {
			s.warn("task %s: the handler ignored its cancelled context; answering cancelled", t.ID)
			s.writeResult(t, resultFrame{Type: "result", ID: t.ID, Status: "error", Error: &errorBody{Code: CodeCancelled, Message: errShutdown.Error()}, Metadata: t.metadata()})
		}
	}
}
