package agent

import (
	"context"
	"errors"
	"fmt"
)

// Standard error codes of the stdio link. Agents may use codes of their own
// (lower_snake_case) as well.
const (
	CodeInvalidParams       = "invalid_params"
	CodeUnknownAction       = "unknown_action"
	CodeInternal            = "internal"
	CodeCancelled           = "cancelled"
	CodeTimeout             = "timeout"
	CodeFrameTooLarge       = "frame_too_large"
	CodeShuttingDown        = "shutting_down"
	CodePermissionDenied    = "permission_denied"
	CodeCycleDetected       = "cycle_detected"
	CodeNotFound            = "not_found"
	CodeProtocolUnsupported = "protocol_version_unsupported"
	CodeFatalConfig         = "fatal_config"
)

// Error is the error of a task or a host call: a code, a human message,
// optional details and whether retrying may help. Return one from a handler
// to choose the code the caller sees; any other error is reported as
// "internal".
type Error struct {
	// Code is a lower_snake code such as "invalid_params" or "not_found".
	Code string
	// Message says what went wrong, for humans.
	Message string
	// Data holds details; it must encode as a JSON object.
	Data map[string]any
	// Retryable is true when running the same request again may succeed.
	Retryable bool

	cause error
}

// Errorf returns an *Error with the given code and a formatted message.
// A %w verb wraps its operand, which errors.Is and errors.As then find.
func Errorf(code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), cause: errors.Unwrap(err)}
}

// NewError wraps err in an *Error with the given code; the message is
// err's text.
func NewError(code string, err error) *Error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return &Error{Code: code, Message: msg, cause: err}
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the wrapped error, if any.
func (e *Error) Unwrap() error { return e.cause }

// WithData returns e after setting data[key] = value.
func (e *Error) WithData(key string, value any) *Error {
	if e.Data == nil {
		e.Data = map[string]any{}
	}
	e.Data[key] = value
	return e
}

// AsRetryable returns e after marking it retryable.
func (e *Error) AsRetryable() *Error {
	e.Retryable = true
	return e
}

// CodeOf returns the code of err: its *Error's code when it wraps one,
// "cancelled" or "timeout" for context errors, "" for nil and "internal"
// otherwise.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCancelled
	}
	return CodeInternal
}

// errorBody is the wire form of an error: {code, message, data?, retryable?}.
type errorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Data      map[string]any `json:"data,omitempty"`
	Retryable bool           `json:"retryable,omitempty"`
}

func (b *errorBody) toError() *Error {
	if b == nil {
		return &Error{Code: CodeInternal, Message: "error without a body"}
	}
	return &Error{Code: b.Code, Message: b.Message, Data: b.Data, Retryable: b.Retryable}
}

func bodyOf(e *Error) *errorBody {
	code := e.Code
	if code == "" {
		code = CodeInternal
	}
	return &errorBody{Code: code, Message: e.Message, Data: e.Data, Retryable: e.Retryable}
}
