package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestResultFramesAreOneLineOfTheSameJSONAsEncodingJSON(t *testing.T) {
	cases := []resultFrame{
		{Type: "result", ID: "h-1", Status: "ok", Result: json.RawMessage(`{"a":[1,2.5,null],"s":"<x> \u00e9"}`)},
		{Type: "result", ID: "h-2", Status: "ok", Result: json.RawMessage("{\n  \"pretty\": [1,\r\n 2]\n}")},
		{Type: "result", ID: "h-\"3\\", Status: "ok", Result: json.RawMessage(`"quoted id"`)},
		{Type: "result", ID: "h-4", Status: "partial"},
		{Type: "result", ID: "h-5", Status: "ok", Result: json.RawMessage(`1`), Metadata: &resultMetadata{Cost: 0.5}},
	}
	for _, r := range cases {
		got, err := encodeFrame(r)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		if bytes.Count(got, []byte("\n")) != 1 || got[len(got)-1] != '\n' {
			t.Fatalf("%s: not one line: %q", r.ID, got)
		}
		want, _ := json.Marshal(r)
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: %s, encoding/json says %s", r.ID, got, want)
		}
	}
}

func TestThePlainResultFrameSkipsEncodingJSONOnlyWhenItCan(t *testing.T) {
	plain := resultFrame{Type: "result", ID: "h-1", Status: "ok", Result: json.RawMessage(`{"a":1}`)}
	if b, ok := plain.plain(); !ok || string(b) != "{\"type\":\"result\",\"id\":\"h-1\",\"status\":\"ok\",\"result\":{\"a\":1}}\n" {
		t.Fatalf("plain result frame = %q, %v", b, ok)
	}
	for _, r := range []resultFrame{
		{Type: "result", ID: "h-2", Status: "ok", Result: json.RawMessage("[1,\n2]")},
		{Type: "result", ID: "h-\"3", Status: "ok", Result: json.RawMessage(`1`)},
		{Type: "result", ID: "h-4", Status: "error", Error: &errorBody{Code: "x"}},
	} {
		if _, ok := r.plain(); ok {
			t.Fatalf("%s: written by hand, though it needs encoding/json", r.ID)
		}
	}
}

func TestOnlySchemasThatAcceptAnyObjectSkipTheWalk(t *testing.T) {
	for schema, open := range map[string]bool{
		`{"type":"object"}`: true,
		`{"type":"object","description":"d","additionalProperties":true}`: true,
		`{"type":"object","properties":{"n":{"type":"integer"}}}`:         false,
		`{"type":"object","required":["n"]}`:                              false,
		`{"type":"object","additionalProperties":false}`:                  false,
		`{"type":"array"}`: false,
	} {
		if got := compileSchema(json.RawMessage(schema)).anyObject; got != open {
			t.Fatalf("%s: anyObject = %v, want %v", schema, got, open)
		}
	}
}
