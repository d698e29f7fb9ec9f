package agent

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"regexp"
)

// headKeep is how much of an oversized line is kept to recover its id.
const headKeep = 4096

// lineReader reads '\n'-terminated lines of any length with a bufio.Reader
// (never bufio.Scanner and its 64 KiB cap). A line longer than max is
// discarded up to its newline and reported as too long, with its first
// bytes kept so the caller can recover the request id.
type lineReader struct {
	br  *bufio.Reader
	max func() int64
	buf []byte
}

func newLineReader(r io.Reader, max func() int64) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its "\n" or "\r\n". When tooLong is
// true, line holds only the line's first bytes. err is io.EOF at the end
// of input (a final unterminated line is returned first).
func (r *lineReader) next() (line []byte, tooLong bool, err error) {
	r.buf = r.buf[:0]
	limit := r.max() + 2 // room for "\r\n"
	total := int64(0)
	for {
		frag, ferr := r.br.ReadSlice('\n')
		total += int64(len(frag))
		if !tooLong {
			if total > limit {
				tooLong = true
				if keep := headKeep - len(r.buf); keep > 0 {
					r.buf = append(r.buf, frag[:min(keep, len(frag))]...)
				}
			} else {
				r.buf = append(r.buf, frag...)
			}
		}
		if ferr == nil {
			break
		}
		if errors.Is(ferr, bufio.ErrBufferFull) {
			continue
		}
		if total > 0 && errors.Is(ferr, io.EOF) {
			break // a final line without a newline
		}
		return nil, false, ferr
	}
	line = bytes.TrimSuffix(r.buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if !tooLong && int64(len(line)) > r.max() {
		tooLong = true
		line = line[:headKeep]
	}
	return line, tooLong, nil
}

var (
	idPattern   = regexp.MustCompile(`"id"\s*:\s*"([^"\\]{1,200})"`)
	typePattern = regexp.MustCompile(`"type"\s*:\s*"([a-z_]{1,40})"`)
)

// recoverField finds a string field near the start of a truncated frame.
func recoverField(head []byte, re *regexp.Regexp) string {
	if m := re.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	return ""
}
