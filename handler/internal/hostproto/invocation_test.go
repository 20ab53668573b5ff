package hostproto

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDecodeInvocation(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		wantData     []string // keys
		wantMetadata []string
		wantErrKey   string
	}{
		{"empty object", `{}`, nil, nil, ""},
		{"null members", `{"Data":null,"Metadata":null}`, nil, nil, ""},
		{"whitespace around", " \n{\"Data\":{\"a\":1}}\t", []string{"a"}, nil, ""},
		{"unknown top-level keys", `{"Data":{"a":1},"Metadata":{"b":"2"},"Other":[1]}`, []string{"a"}, []string{"b"}, ""},
		{"members with whitespace", `{"Data": {"a":1} ,"Metadata":  {"b" : null}}`, []string{"a"}, []string{"b"}, ""},
		{"empty", ``, nil, nil, "body"},
		{"array", `[{}]`, nil, nil, "body"},
		{"null", `null`, nil, nil, "body"},
		{"string", `"{}"`, nil, nil, "body"},
		{"truncated", `{"Data":{}`, nil, nil, "body"},
		{"trailing data", `{} {}`, nil, nil, "body"},
		{"Data a string", `{"Data":"x"}`, nil, nil, "Data"},
		{"Data an array", `{"Data":[]}`, nil, nil, "Data"},
		{"Metadata a number", `{"Metadata":1}`, nil, nil, "Metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := DecodeInvocation([]byte(tt.body))
			if tt.wantErrKey != "" {
				var de *DecodeError
				if !errors.As(err, &de) || de.Key != tt.wantErrKey {
					t.Fatalf("DecodeInvocation(%q) error = %v, want a *DecodeError for %s", tt.body, err, tt.wantErrKey)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeInvocation(%q): %v", tt.body, err)
			}
			if inv.Data == nil || inv.Metadata == nil {
				t.Fatalf("Data or Metadata is nil, want empty maps")
			}
			if got := keysOf(inv.Data); !equalStrings(got, tt.wantData) {
				t.Errorf("Data keys = %v, want %v", got, tt.wantData)
			}
			if got := keysOf(inv.Metadata); !equalStrings(got, tt.wantMetadata) {
				t.Errorf("Metadata keys = %v, want %v", got, tt.wantMetadata)
			}
		})
	}
}

func keysOf(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return sortedStrings(ks)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
