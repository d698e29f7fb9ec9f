package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Counts is the result of count, count_text and merge.
type Counts struct {
	Files    int            `json:"files"`
	Lines    int            `json:"lines"`
	Words    int            `json:"words"`
	Chars    int            `json:"chars"`
	TopTerms []TermCount    `json:"top_terms"`
	Skipped  []Skipped      `json:"skipped,omitempty"`
	Terms    map[string]int `json:"terms,omitempty"`
	// Exact is false after merging counts that carried only top_terms:
	// the merged top_terms are then a lower bound.
	Exact *bool `json:"exact,omitempty"`
}

// TermCount is one term and how often it occurs.
type TermCount struct {
	Term  string `json:"term"`
	Count int    `json:"count"`
}

// Skipped is a file that was not counted, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// tally accumulates counts and term frequencies.
type tally struct {
	files, lines, words, chars int
	terms                      map[string]int
	skipped                    []Skipped
}

func newTally() *tally { return &tally{terms: map[string]int{}} }

// add counts one text: lines (a last line without a newline counts too),
// words (runs of non-space characters, as wc -w), chars (Unicode code
// points) and terms (lowercase runs of letters and digits, apostrophes
// inside words kept, with at least one letter, at least 2 characters, and
// no stop words).
func (t *tally) add(text []byte) {
	if len(text) == 0 {
		return
	}
	t.lines += bytes.Count(text, []byte{'\n'})
	if text[len(text)-1] != '\n' {
		t.lines++
	}
	t.chars += utf8.RuneCount(text)
	t.words += len(bytes.Fields(text))

	var term []rune
	letters := false
	flush := func() {
		// Trim apostrophes at the ends ("'quoted'" -> "quoted").
		for len(term) > 0 && term[len(term)-1] == '\'' {
			term = term[:len(term)-1]
		}
		if len(term) >= 2 && letters {
			w := string(term)
			if !stopWords[w] {
				t.terms[w]++
			}
		}
		term, letters = term[:0], false
	}
	for len(text) > 0 {
		r, size := utf8.DecodeRune(text)
		text = text[size:]
		switch {
		case unicode.IsLetter(r):
			term = append(term, unicode.ToLower(r))
			letters = true
		case unicode.IsDigit(r):
			term = append(term, r)
		case (r == '\'' || r == '’') && len(term) > 0:
			term = append(term, '\'')
		default:
			flush()
		}
	}
	flush()
}

func (t *tally) result(top int, withTerms bool) Counts {
	c := Counts{Files: t.files, Lines: t.lines, Words: t.words, Chars: t.chars,
		TopTerms: topTerms(t.terms, top), Skipped: t.skipped}
	if withTerms {
		c.Terms = t.terms
	}
	return c
}

// topTerms returns the top n terms, by count (highest first), then term.
func topTerms(terms map[string]int, n int) []TermCount {
	all := make([]TermCount, 0, len(terms))
	for term, count := range terms {
		all = append(all, TermCount{term, count})
	}
	slices.SortFunc(all, func(a, b TermCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Term, b.Term))
	})
	return all[:min(n, len(all))]
}

// skipDirs are folders a walk never enters.
var skipDirs = map[string]bool{"node_modules": true, "__pycache__": true}

// errMissing lists paths that do not exist.
type errMissing struct{ paths []string }

func (e *errMissing) Error() string {
	return "no such file or directory: " + strings.Join(e.paths, ", ")
}

// collectFiles expands paths (files or directories, walked in lexical
// order, hidden entries and node_modules skipped) into a sorted list of
// regular files without duplicates.
func collectFiles(ctx context.Context, paths []string) ([]string, error) {
	seen := map[string]bool{}
	var files, missing []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		info, err := os.Stat(abs)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			add(abs)
			continue
		}
		err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if path != abs && (strings.HasPrefix(d.Name(), ".") || (d.IsDir() && skipDirs[d.Name()])) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				add(path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(missing) > 0 {
		return nil, &errMissing{missing}
	}
	slices.Sort(files)
	return files, nil
}

// maxFileBytes is the largest file counted; larger ones are skipped.
const maxFileBytes = 256 << 20

// countFile adds one file to t, or records why it was skipped.
func (t *tally) countFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.Size() > maxFileBytes {
		t.skipped = append(t.skipped, Skipped{path, "too_large"})
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if isBinary(data) {
		t.skipped = append(t.skipped, Skipped{path, "binary"})
		return nil
	}
	t.files++
	t.add(data)
	return nil
}

// isBinary reports whether data looks binary: a NUL byte or invalid
// UTF-8 in its first 8 KiB.
func isBinary(data []byte) bool {
	sample := data[:min(len(data), 8192)]
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if len(sample) < len(data) {
		// Do not blame a rune the sample cut in half.
		for i := 0; i < utf8.UTFMax-1 && len(sample) > 0 && !utf8.FullRune(sample[max(0, len(sample)-utf8.UTFMax):]); i++ {
			sample = sample[:len(sample)-1]
		}
	}
	return !utf8.Valid(sample)
}

// merge adds several counts together.
func merge(counts []Counts, top int) Counts {
	t := newTally()
	exact := true
	for _, c := range counts {
		t.files += c.Files
		t.lines += c.Lines
		t.words += c.Words
		t.chars += c.Chars
		t.skipped = append(t.skipped, c.Skipped...)
		switch {
		case c.Terms != nil:
			for term, n := range c.Terms {
				t.terms[term] += n
			}
		default:
			if c.Exact != nil && !*c.Exact || len(c.TopTerms) > 0 {
				exact = false
			}
			for _, tc := range c.TopTerms {
				t.terms[tc.Term] += tc.Count
			}
		}
	}
	out := t.result(top, exact)
	out.Exact = &exact
	return out
}
