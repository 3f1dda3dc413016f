// Renders templates with Go's own text/template, for herder's comparison test
// (tests/core/client/test_gotemplate_vs_go.py).
//
// Input on stdin, JSON: {"data": ..., "env": {...}, "cases": [{"template": "...", "left": "", "right": ""}]}.
// Output on stdout, JSON: one {"output": "...", "error": "..."} per case. JSON numbers that are whole
// become int, others float64, as herder's data holds them. The functions are consul-template's that need
// no network, written as plain Go.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/template"
)

type testCase struct {
	Template string `json:"template"`
	Left     string `json:"left"`
	Right    string `json:"right"`
}

type input struct {
	Data  json.RawMessage   `json:"data"`
	Env   map[string]string `json:"env"`
	Cases []testCase        `json:"cases"`
}

type result struct {
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
}

// typed turns json.Number into int (whole numbers) or float64, recursively.
func typed(value interface{}) interface{} {
	switch v := value.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return int(i)
		}
		f, _ := v.Float64()
		return f
	case []interface{}:
		for i := range v {
			v[i] = typed(v[i])
		}
		return v
	case map[string]interface{}:
		for k := range v {
			v[k] = typed(v[k])
		}
		return v
	}
	return value
}

func texts(items interface{}) []string {
	value := reflect.ValueOf(items)
	out := make([]string, value.Len())
	for i := range out {
		out[i] = fmt.Sprint(value.Index(i).Interface())
	}
	return out
}

func contains(needle, haystack interface{}) bool {
	if s, ok := haystack.(string); ok {
		return strings.Contains(s, fmt.Sprint(needle))
	}
	value := reflect.ValueOf(haystack)
	for i := 0; i < value.Len(); i++ {
		if reflect.DeepEqual(value.Index(i).Interface(), needle) {
			return true
		}
	}
	return false
}

func functions(env map[string]string) template.FuncMap {
	return template.FuncMap{
		"env":       func(name string) string { return env[name] },
		"toUpper":   strings.ToUpper,
		"toLower":   strings.ToLower,
		"toTitle":   strings.Title,
		"trimSpace": strings.TrimSpace,
		"toJSON": func(v interface{}) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"toJSONPretty": func(v interface{}) (string, error) {
			b, err := json.MarshalIndent(v, "", "  ")
			return string(b), err
		},
		"split": func(sep, s string) []string {
			if s == "" {
				return []string{}
			}
			return strings.Split(s, sep)
		},
		"join":         func(sep string, items interface{}) string { return strings.Join(texts(items), sep) },
		"replaceAll":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"contains":     contains,
		"in":           func(haystack, needle interface{}) bool { return contains(needle, haystack) },
		"parseInt":     func(s string) (int64, error) { return strconv.ParseInt(strings.TrimSpace(s), 10, 64) },
		"parseFloat":   func(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(s), 64) },
		"parseBool":    func(s string) (bool, error) { return strconv.ParseBool(strings.TrimSpace(s)) },
		"base64Encode": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"base64Decode": func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		},
	}
}

func render(c testCase, data interface{}, funcs template.FuncMap) result {
	tmpl, err := template.New("t").Delims(c.Left, c.Right).Funcs(funcs).Parse(c.Template)
	if err != nil {
		return result{Error: err.Error()}
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return result{Output: out.String(), Error: err.Error()}
	}
	return result{Output: out.String()}
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	decoder := json.NewDecoder(bytes.NewReader(in.Data))
	decoder.UseNumber()
	var data interface{}
	if err := decoder.Decode(&data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	data = typed(data)
	funcs := functions(in.Env)
	results := make([]result, len(in.Cases))
	for i, c := range in.Cases {
		results[i] = render(c, data, funcs)
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
