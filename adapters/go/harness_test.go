package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// harness drives one session over pipes, playing the host.
type harness struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func startSession(t *testing.T, a *Agent) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1)}
	go func() {
		err := a.ServeStream(context.Background(), inR, outW)
		outW.Close()
		h.done <- err
	}()
	t.Cleanup(func() { inW.Close(); go io.Copy(io.Discard, outR) })
	return h
}

// handshake reads hello and sends welcome.
func (h *harness) handshake() map[string]any {
	h.t.Helper()
	hello := h.recv()
	if hello["type"] != "hello" {
		h.t.Fatalf("first frame = %v, want hello", hello)
	}
	h.send(map[string]any{"type": "welcome", "protocol": 1, "max_frame": 16 << 20, "max_in_flight": 8, "config": map[string]any{"k": "v"}, "log_level": "info"})
	return hello
}

func (h *harness) send(frame any) {
	h.t.Helper()
	b, err := json.Marshal(frame)
	if err != nil {
		h.t.Fatal(err)
	}
	h.sendLine(b)
}

func (h *harness) sendLine(b []byte) {
	h.t.Helper()
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		h.t.Fatalf("write: %v", err)
	}
}

func (h *harness) recv() map[string]any {
	h.t.Helper()
	type res struct {
		line []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		line, err := h.out.ReadBytes('\n')
		ch <- res{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			h.t.Fatalf("read frame: %v", r.err)
		}
		var m map[string]any
		if err := json.Unmarshal(r.line, &m); err != nil {
			h.t.Fatalf("frame %q: %v", r.line, err)
		}
		return m
	case <-time.After(5 * time.Second):
		h.t.Fatal("no frame within 5 s")
	}
	return nil
}

// recvType skips frames until one of type typ.
func (h *harness) recvType(typ string) map[string]any {
	h.t.Helper()
	for {
		if f := h.recv(); f["type"] == typ {
			return f
		}
	}
}

func (h *harness) task(id, action string, params any, extra ...any) {
	h.t.Helper()
	f := map[string]any{"type": "task", "id": id, "action": action, "params": params, "attempt": 1}
	for i := 0; i+1 < len(extra); i += 2 {
		f[extra[i].(string)] = extra[i+1]
	}
	h.send(f)
}

func (h *harness) wait() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("session did not end within 10 s")
	}
	return nil
}

func errCode(f map[string]any) string {
	e, _ := f["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}
