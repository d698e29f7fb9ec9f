package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// validateParams checks the shape of params against an action's JSON Schema
// and returns the problems found: the type keyword and required, through
// properties, items and additionalProperties. That is the params rule
// (docs/protocol.md): the host checks the whole schema (JSON Schema Draft
// 2020-12) before a task reaches the agent, and the adapters check only the
// shape, so a handler never sees the wrong JSON type and no SDK refuses what
// the host accepted. Every other keyword (enum, const, minimum, anyOf, oneOf,
// pattern ...) is the host's.
//
// The schema is parsed once, when the action is declared (compileSchema). An
// action whose schema accepts any object ({"type": "object"}) has its params
// checked for being an object only: decoding them to walk an empty schema
// was, with the schema's own parse, most of a Go echo agent's CPU per task.
func (c paramsCheck) validateParams(params json.RawMessage) []string {
	if c.schema == nil {
		return nil
	}
	if c.anyObject {
		// params come from a frame already parsed whole, so they are valid JSON:
		// the first byte tells an object.
		if trimmed := bytes.TrimLeft(params, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
			return nil
		}
	}
	s := c.schema
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{"params: not valid JSON: " + err.Error()}
	}
	return validate(s, v, "params")
}

func validate(s map[string]any, v any, path string) []string {
	var problems []string
	if t, ok := s["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				if s, ok := x.(string); ok {
					types = append(types, s)
				}
			}
		}
		if len(types) > 0 && !anyType(v, types) {
			return append(problems, fmt.Sprintf("%s: expected %s, got %s", path, strings.Join(types, " or "), typeName(v)))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if k, ok := k.(string); ok {
					if _, present := v[k]; !present {
						problems = append(problems, path+"."+k+": is required")
					}
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		extra, _ := s["additionalProperties"].(map[string]any)
		for _, k := range sortedKeys(v) {
			sub, declared := props[k].(map[string]any)
			if _, named := props[k]; !named && extra != nil {
				sub, declared = extra, true
			}
			if declared {
				problems = append(problems, validate(sub, v[k], path+"."+k)...)
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range v {
				problems = append(problems, validate(items, x, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return problems
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func anyType(v any, types []string) bool {
	for _, t := range types {
		switch t {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return true
			}
		case "integer":
			if n, ok := v.(json.Number); ok {
				if x, err := n.Float64(); err == nil && x == math.Trunc(x) {
					return true
				}
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		default:
			return true
		}
	}
	return false
}

func typeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if x, err := v.Float64(); err == nil && x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// SchemaOf returns an action option that declares the JSON Schema of P as
// the action's params schema: a struct becomes an object whose properties
// follow its json tags (fields tagged `agent:"required"` are required),
// integers "integer", floats "number", slices "array", maps "object".
// Use it with Typed:
//
//	a.Action("sleep", agent.Typed(sleep), agent.SchemaOf[SleepParams]())
func SchemaOf[P any]() ActionOption {
	s := typeSchema(reflect.TypeFor[P](), map[reflect.Type]bool{})
	if s["type"] == nil {
		s["type"] = "object"
	}
	return WithSchema(s)
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func typeSchema(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || seen[t] {
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), seen)}
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = typeSchema(f.Type, seen)
			if f.Tag.Get("agent") == "required" {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// paramsCheck is an action's params schema, parsed once.
type paramsCheck struct {
	schema    map[string]any // nil: no schema, or not a JSON object (nothing is checked)
	anyObject bool           // every JSON object passes the schema
}

// notConstraining are the schema keys that do not constrain an object: a schema
// of only these (and type "object") accepts any params, as the host decides too.
var notConstraining = map[string]bool{
	"type": true, "title": true, "description": true, "$schema": true, "$id": true,
	"additionalProperties": true,
}

func compileSchema(schema json.RawMessage) paramsCheck {
	var s map[string]any
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || s == nil {
		return paramsCheck{}
	}
	open := s["type"] == "object"
	for k := range s {
		open = open && notConstraining[k]
	}
	if extra, ok := s["additionalProperties"]; ok {
		m, isMap := extra.(map[string]any)
		open = open && (extra == true || (isMap && len(m) == 0))
	}
	return paramsCheck{schema: s, anyObject: open}
}
