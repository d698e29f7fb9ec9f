package agent

import (
	"context"
	"encoding/json"
)

// HandlerAction is the action the host invokes once per mailbox message.
const HandlerAction = "on_message"

// Message is a message from a mailbox or a topic; Sender is who the host
// says sent it ("agent:<name>", ...).
type Message struct {
	ID            string          `json:"id"`
	Sequence      int64           `json:"sequence"`
	Sender        string          `json:"sender"`
	Type          string          `json:"type"`
	Data          json.RawMessage `json:"data,omitempty"`
	Agent         string          `json:"agent,omitempty"`
	Topic         string          `json:"topic,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	SessionID     string          `json:"session_id,omitempty"`
	SentAt        float64         `json:"sent_at,omitempty"`
}

// Bind decodes the message's data into v.
func (m *Message) Bind(v any) error {
	if len(m.Data) == 0 {
		return nil
	}
	return json.Unmarshal(m.Data, v)
}

// SendRequest is a message for one agent's mailbox ("msg.send").
type SendRequest struct {
	Agent         string `json:"agent"`
	Type          string `json:"type"`
	Data          any    `json:"data"`
	CorrelationID string `json:"correlation_id"`
	SessionID     string `json:"session_id"`
	RequestID     string `json:"request_id"`
}

// SendResult is what the host says about a sent message.
type SendResult struct {
	Message      Message `json:"message"`
	MailboxDepth int     `json:"mailbox_depth"`
}

// PublishRequest is a message for a topic ("msg.publish").
type PublishRequest struct {
	Topic         string `json:"topic"`
	Type          string `json:"type"`
	Data          any    `json:"data"`
	CorrelationID string `json:"correlation_id"`
	SessionID     string `json:"session_id"`
}

// PublishResult is what the host says about a published message.
type PublishResult struct {
	Message     Message `json:"message"`
	Subscribers int     `json:"subscribers"`
}

// Messages is the calling agent's mailbox, other agents' mailboxes and
// topics. Get one with MessagesOf.
type Messages struct{ t *Task }

// MessagesOf returns the messaging helpers for the task.
func MessagesOf(t *Task) *Messages { return &Messages{t: t} }

// Send puts a message in another agent's mailbox ("mailbox_full" when it is
// full).
func (m *Messages) Send(ctx context.Context, req SendRequest) (*SendResult, error) {
	var r SendResult
	if err := callInto(ctx, m.t, "msg.send", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Publish publishes on a topic; every current subscriber gets it.
func (m *Messages) Publish(ctx context.Context, req PublishRequest) (*PublishResult, error) {
	var r PublishResult
	if err := callInto(ctx, m.t, "msg.publish", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Receive takes up to max messages (10 when 0) from this agent's mailbox,
// waiting up to waitMS milliseconds for the first.
func (m *Messages) Receive(ctx context.Context, max int, waitMS int64) ([]Message, error) {
	if max <= 0 {
		max = 10
	}
	var r struct {
		Messages []Message `json:"messages"`
	}
	if err := callInto(ctx, m.t, "msg.receive", map[string]any{"max": max, "wait_ms": waitMS}, &r); err != nil {
		return nil, err
	}
	if r.Messages == nil {
		r.Messages = []Message{}
	}
	return r.Messages, nil
}

// Subscribe has a topic's messages copied into this agent's mailbox; it
// returns the agent's topics.
func (m *Messages) Subscribe(ctx context.Context, topic string) ([]string, error) {
	return m.topics(ctx, "msg.subscribe", topic)
}

// Unsubscribe stops copying a topic's messages; it returns the agent's topics.
func (m *Messages) Unsubscribe(ctx context.Context, topic string) ([]string, error) {
	return m.topics(ctx, "msg.unsubscribe", topic)
}

func (m *Messages) topics(ctx context.Context, method, topic string) ([]string, error) {
	var r struct {
		Topics []string `json:"topics"`
	}
	if err := callInto(ctx, m.t, method, map[string]any{"topic": topic}, &r); err != nil {
		return nil, err
	}
	if r.Topics == nil {
		r.Topics = []string{}
	}
	return r.Topics, nil
}

// MessageHandler handles one mailbox message.
type MessageHandler func(ctx context.Context, t *Task, msg Message) (any, error)

// OnMessage registers handler as the agent's "on_message" action: the host
// hands it the mailbox's messages one at a time, in order, again if the
// agent died before answering (at least once).
func OnMessage(a *Agent, handler MessageHandler) {
	a.Action(HandlerAction, func(ctx context.Context, t *Task) (any, error) {
		var p struct {
			Message Message `json:"message"`
		}
		if err := t.Bind(&p); err != nil {
			return nil, err
		}
		return handler(ctx, t, p.Message)
	}, WithActionDescription("Receives mailbox messages (delivered by the host)."))
}
