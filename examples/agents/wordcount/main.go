// Command wordcount is an Ether agent, written with the Go adapter, that
// counts lines, words, characters and top terms of files, directories or
// text, and merges such counts: count per shard (map), then merge
// (reduce). Results are deterministic: the same input gives the same bytes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

const (
	defaultTop = 10
	maxTop     = 1000
)

type countParams struct {
	Paths []string `json:"paths" agent:"required"`
	Top   int      `json:"top,omitempty"`
	// Terms asks for every term's count in "terms" (for an exact merge).
	Terms bool `json:"terms,omitempty"`
}

type countTextParams struct {
	Text  string `json:"text" agent:"required"`
	Top   int    `json:"top,omitempty"`
	Terms bool   `json:"terms,omitempty"`
}

type mergeParams struct {
	Counts []Counts `json:"counts" agent:"required"`
	Top    int      `json:"top,omitempty"`
}

func main() { newAgent().Serve() }

func newAgent() *agent.Agent {
	a := agent.New("wordcount",
		agent.WithVersion("1.0.0"),
		agent.WithDescription("Counts lines, words, characters and top terms of files, directories or text; merges counts (map/reduce)."),
		agent.WithTags("filesystem", "text-analysis", "map-reduce"),
		agent.WithMaxConcurrency(8),
	)
	a.Action("count", agent.Typed(count),
		agent.WithActionDescription("Count lines, words, chars and top terms of files and directories (walked recursively; hidden entries, node_modules and binary files skipped)."),
		agent.SchemaOf[countParams](), agent.Idempotent())
	a.Action("count_text", agent.Typed(countText),
		agent.WithActionDescription("Count lines, words, chars and top terms of a text."),
		agent.SchemaOf[countTextParams](), agent.Idempotent())
	a.Action("merge", agent.Typed(mergeCounts),
		agent.WithActionDescription("Merge several count results into one (the reduce step); exact when every input carries terms."),
		agent.SchemaOf[mergeParams](), agent.Idempotent())
	return a
}

func topOf(n int) (int, error) {
	switch {
	case n == 0:
		return defaultTop, nil
	case n < 0 || n > maxTop:
		return 0, agent.Errorf(agent.CodeInvalidParams, "top must be between 1 and %d, got %d", maxTop, n)
	}
	return n, nil
}

func count(ctx context.Context, t *agent.Task, p countParams) (Counts, error) {
	top, err := topOf(p.Top)
	if err != nil {
		return Counts{}, err
	}
	if len(p.Paths) == 0 {
		return Counts{}, agent.Errorf(agent.CodeInvalidParams, "paths is empty: give files or directories")
	}
	files, err := collectFiles(ctx, p.Paths)
	if err != nil {
		return Counts{}, pathError(err)
	}
	tl := newTally()
	last := time.Now()
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return Counts{}, err
		}
		if err := tl.countFile(f); err != nil {
			return Counts{}, pathError(err)
		}
		if time.Since(last) > 200*time.Millisecond || i == len(files)-1 {
			t.Progress(float64(i+1), float64(len(files)), f)
			last = time.Now()
		}
	}
	t.Log().Debug("counted", "files", tl.files, "skipped", len(tl.skipped), "words", tl.words)
	return tl.result(top, p.Terms), nil
}

func countText(_ context.Context, _ *agent.Task, p countTextParams) (Counts, error) {
	top, err := topOf(p.Top)
	if err != nil {
		return Counts{}, err
	}
	tl := newTally()
	tl.add([]byte(p.Text))
	return tl.result(top, p.Terms), nil
}

func mergeCounts(_ context.Context, _ *agent.Task, p mergeParams) (Counts, error) {
	top, err := topOf(p.Top)
	if err != nil {
		return Counts{}, err
	}
	return merge(p.Counts, top), nil
}

// pathError gives file system errors the codes callers can act on.
func pathError(err error) error {
	var missing *errMissing
	var pe *fs.PathError
	switch {
	case errors.As(err, &missing):
		return agent.Errorf(agent.CodeNotFound, "%s", missing.Error()).WithData("missing", missing.paths)
	case errors.Is(err, fs.ErrNotExist):
		return agent.NewError(agent.CodeNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		e := agent.NewError(agent.CodePermissionDenied, err)
		if errors.As(err, &pe) {
			e.WithData("path", pe.Path)
		}
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return agent.NewError("io_error", fmt.Errorf("reading files: %w", err))
}
