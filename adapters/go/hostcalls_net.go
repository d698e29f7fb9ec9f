package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"
)

// FetchRequest is an HTTP request through the host's egress policy
// ("net.fetch"). Method defaults to GET; Body is sent as bytes.
type FetchRequest struct {
	URL      string
	Method   string
	Headers  map[string]string
	Body     []byte
	Timeout  time.Duration
	MaxBytes int64
}

// FetchResponse is what net.fetch brought back (after redirects).
type FetchResponse struct {
	Status    int
	Headers   map[string]string
	Body      []byte
	URL       string
	Redirects int
	AuditIDs  []int64
}

// Text returns the body as a string.
func (r *FetchResponse) Text() string { return string(r.Body) }

// JSON decodes the body into v.
func (r *FetchResponse) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Fetch fetches a URL through the host's egress policy. A refusal is an
// *Error whose code is the reason ("host_not_allowed", "private_address",
// "rate_limited", ...).
func Fetch(ctx context.Context, t *Task, req FetchRequest) (*FetchResponse, error) {
	method := req.Method
	if method == "" {
		method = "GET"
	}
	headers := req.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	params := map[string]any{"url": req.URL, "method": method, "headers": headers}
	if req.Body != nil {
		params["body_base64"] = base64.StdEncoding.EncodeToString(req.Body)
	}
	if req.Timeout > 0 {
		params["timeout_ms"] = req.Timeout.Milliseconds()
	}
	if req.MaxBytes > 0 {
		params["max_bytes"] = req.MaxBytes
	}
	var r struct {
		Status     int               `json:"status"`
		Headers    map[string]string `json:"headers"`
		URL        string            `json:"url"`
		Redirects  int               `json:"redirects"`
		AuditIDs   []int64           `json:"audit_ids"`
		Text       *string           `json:"text"`
		BodyBase64 string            `json:"body_base64"`
	}
	if err := callInto(ctx, t, "net.fetch", params, &r); err != nil {
		return nil, err
	}
	out := &FetchResponse{Status: r.Status, Headers: r.Headers, URL: r.URL, Redirects: r.Redirects, AuditIDs: r.AuditIDs}
	if out.URL == "" {
		out.URL = req.URL
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if r.Text != nil {
		out.Body = []byte(*r.Text)
	} else if r.BodyBase64 != "" {
		body, err := base64.StdEncoding.DecodeString(r.BodyBase64)
		if err != nil {
			return nil, Errorf(CodeInternal, "reply of net.fetch: body_base64: %v", err)
		}
		out.Body = body
	}
	return out, nil
}
