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
