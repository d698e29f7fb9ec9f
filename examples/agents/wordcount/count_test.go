package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCountTextCountsLinesWordsCharsAndTerms(t *testing.T) {
	tl := newTally()
	tl.add([]byte("The cat and the Cat's hat.\nCats don't sit; the cat sat — ✓ 42 x2\nlast line"))
	got := tl.result(3, false)
	if got.Lines != 3 || got.Words != 18 || got.Chars != 74 {
		t.Errorf("lines, words, chars = %d, %d, %d", got.Lines, got.Words, got.Chars)
	}
	want := []TermCount{{"cat", 2}, {"cat's", 1}, {"cats", 1}}
	if !equalJSON(got.TopTerms, want) {
		t.Errorf("top_terms = %v, want %v", got.TopTerms, want)
	}
	if tl.terms["don't"] != 0 || tl.terms["the"] != 0 || tl.terms["42"] != 0 || tl.terms["x2"] != 1 {
		t.Errorf("terms = %v: want stop words and bare numbers left out", tl.terms)
	}
}

func TestCountWalksDirectoriesSkippingBinaryAndHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b.txt", "beta beta gamma\n")
	write(t, dir, "sub/a.md", "alpha beta\n")
	write(t, dir, "img.bin", "\x00\x01\x02binary")
	write(t, dir, ".hidden/x.txt", "hidden words\n")
	write(t, dir, "node_modules/m.js", "module words\n")

	files, err := collectFiles(context.Background(), []string{dir, filepath.Join(dir, "b.txt")})
	if err != nil {
		t.Fatal(err)
	}
	tl := newTally()
	for _, f := range files {
		if err := tl.countFile(f); err != nil {
			t.Fatal(err)
		}
	}
	got := tl.result(10, false)
	if got.Files != 2 || got.Lines != 2 || got.Words != 5 {
		t.Errorf("files, lines, words = %d, %d, %d", got.Files, got.Lines, got.Words)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Reason != "binary" {
		t.Errorf("skipped = %v", got.Skipped)
	}
	if !equalJSON(got.TopTerms, []TermCount{{"beta", 3}, {"alpha", 1}, {"gamma", 1}}) {
		t.Errorf("top_terms = %v", got.TopTerms)
	}
}

func TestMergeIsExactWithTermsAndALowerBoundWithout(t *testing.T) {
	a, b := newTally(), newTally()
	a.files, b.files = 1, 1
	a.add([]byte("red green red"))
	b.add([]byte("green blue green"))
	m := merge([]Counts{a.result(1, true), b.result(1, true)}, 2)
	if !*m.Exact || m.Files != 2 || m.Words != 6 || !equalJSON(m.TopTerms, []TermCount{{"green", 3}, {"red", 2}}) {
		t.Errorf("exact merge = %+v", m)
	}
	m = merge([]Counts{a.result(1, false), b.result(1, false)}, 2)
	if *m.Exact || !equalJSON(m.TopTerms, []TermCount{{"green", 2}, {"red", 2}}) {
		t.Errorf("top-only merge = %+v", m)
	}
}

func TestIsBinary(t *testing.T) {
	long := bytes.Repeat([]byte("é"), 5000) // the 8 KiB sample cuts a rune in half
	for _, c := range []struct {
		data   []byte
		binary bool
	}{{[]byte("plain"), false}, {long, false}, {[]byte("a\x00b"), true}, {[]byte("\xff\xfe"), true}} {
		if isBinary(c.data) != c.binary {
			t.Errorf("isBinary(%.20q) = %v", c.data, !c.binary)
		}
	}
}

// TestActionsOverTheLink drives the agent through the stdio link, as the
// host does.
func TestActionsOverTheLink(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.txt", "map reduce map\n")
	missing := filepath.Join(dir, "nope")
	tasks := []map[string]any{
		{"type": "task", "id": "h-1", "action": "count", "params": map[string]any{"paths": []string{dir}, "terms": true}},
		{"type": "task", "id": "h-2", "action": "count", "params": map[string]any{"paths": []string{dir, missing}}},
		{"type": "task", "id": "h-3", "action": "count", "params": map[string]any{"paths": "a.txt"}},
		{"type": "task", "id": "h-4", "action": "count_text", "params": map[string]any{"text": "alpha beta beta", "top": 1}},
		{"type": "task", "id": "h-5", "action": "count", "params": map[string]any{"paths": []string{}}},
	}
	var in strings.Builder
	in.WriteString(`{"type":"welcome","protocol":1}` + "\n")
	for _, task := range tasks {
		b, _ := json.Marshal(task)
		in.Write(append(b, '\n'))
	}
	var out bytes.Buffer
	if err := newAgent().ServeStream(context.Background(), strings.NewReader(in.String()), &out); err != nil {
		t.Fatal(err)
	}
	results := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("frame %q: %v", line, err)
		}
		if f["type"] == "result" {
			results[f["id"].(string)] = f
		}
	}
	code := func(id string) any { e, _ := results[id]["error"].(map[string]any); return e["code"] }
	r1, _ := results["h-1"]["result"].(map[string]any)
	if results["h-1"]["status"] != "ok" || r1["files"] != 1.0 || r1["words"] != 3.0 || r1["terms"].(map[string]any)["map"] != 2.0 {
		t.Errorf("h-1 = %v", results["h-1"])
	}
	if code("h-2") != "not_found" || !strings.Contains(string(must(json.Marshal(results["h-2"]))), "nope") {
		t.Errorf("h-2 = %v", results["h-2"])
	}
	if code("h-3") != "invalid_params" || code("h-5") != "invalid_params" {
		t.Errorf("h-3 = %v, h-5 = %v", results["h-3"], results["h-5"])
	}
	r4, _ := results["h-4"]["result"].(map[string]any)
	if !equalJSON(r4["top_terms"], []TermCount{{"beta", 2}}) || r4["files"] != 0.0 {
		t.Errorf("h-4 = %v", results["h-4"])
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// equalJSON compares two values by their JSON meaning.
func equalJSON(a, b any) bool {
	var x, y any
	_ = json.Unmarshal(must(json.Marshal(a)), &x)
	_ = json.Unmarshal(must(json.Marshal(b)), &y)
	return reflect.DeepEqual(x, y)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
