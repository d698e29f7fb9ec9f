package agent

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

var errInvalidRaw = errors.New("json.RawMessage result is not valid JSON")

// tooLargeError reports a frame over the link's max frame.
type tooLargeError struct{ size, max int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the max frame of %d bytes", e.size, e.max)
}

// frameWriter owns the frame stream: every frame is encoded first and then
// written whole with one Write under a mutex, so frames never interleave.
type frameWriter struct {
	mu       sync.Mutex
	w        io.Writer
	max      atomic.Int64
	broken   atomic.Bool
	onBroken func(error)
}

func newFrameWriter(w io.Writer, max int64, onBroken func(error)) *frameWriter {
	fw := &frameWriter{w: w, onBroken: onBroken}
	fw.max.Store(max)
	return fw
}

// send encodes v and writes it as one line. It returns a *tooLargeError,
// without writing, when the frame exceeds the max frame.
func (fw *frameWriter) send(v any) error {
	b, err := encodeFrame(v)
	if err != nil {
		return err
	}
	if size, max := int64(len(b)-1), fw.max.Load(); size > max {
		return &tooLargeError{size: size, max: max}
	}
	return fw.write(b)
}

func (fw *frameWriter) write(b []byte) error {
	if fw.broken.Load() {
		return io.ErrClosedPipe
	}
	fw.mu.Lock()
	_, err := fw.w.Write(b)
	fw.mu.Unlock()
	if err != nil && !fw.broken.Swap(true) && fw.onBroken != nil {
		fw.onBroken(err)
	}
	return err
}
