package hostproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// addGoldenSeeds adds every testdata file to f's seed corpus (inputs and
// want files alike: both are JSON a decoder must survive).
func addGoldenSeeds(f *testing.F) {
	for _, path := range goldenInputs(f) {
		f.Add(readFile(f, path))
	}
	for _, s := range []string{
		``,
		`{"Data":{"message":""},"Metadata":{"SessionId":"o-1","DeliveryCount":3}}`,
		`{"Data":{"message":"AA=="},"Metadata":{"SessionId":"\"\\ud800\"","MessageId":" \"a\" ","Subject":"\"a\" x","To":"\"\\\"x\\\"\""}}`,
		`{"Data":{"message":"AA=="},"Metadata":{"EnqueuedTimeUtc":"2026-11-29T10:20:30,5","ExpiresAt":"0001-01-01T01:30:00.9+01:00","SessionActions":{"SessionLockedUntil":"\"9999-12-31T23:59:59.99999999Z\""}}}`,
		`{"Data":{"message":"AA=="},"Metadata":{"ApplicationProperties":"{\"a\":1,\"a\":-0,\"b\":[1E+2,{}]}","DeliveryCount":"\"-0\"","SequenceNumber":-9223372036854775808}}`,
		`{"Data":{"timer":"{\"ScheduleStatus\":{\"Last\":\"0001-01-01T00:00:00.00000001Z\",\"Next\":null}}"}}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeInvocation: never panics; failures are *DecodeError; an
// accepted invocation re-encodes (json.Marshal) to a fixed point.
func FuzzDecodeInvocation(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		inv, err := DecodeInvocation(body)
		if fast, ok := decodeInvocationOnePass(body); ok {
			if slow, err := decodeInvocationChecked(body); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("one pass gives %+v, the checked decoder %+v, %v", fast, slow, err)
			}
		}
		checkPlainString(t, body)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, want *DecodeError", err, err)
			}
			return
		}
		for _, raw := range inv.Metadata {
			checkPlainString(t, raw)
			if s, ok := jsonString(raw); ok {
				checkPlainString(t, []byte(s))
			}
		}
		if inv.Data == nil || inv.Metadata == nil {
			t.Fatalf("Data or Metadata is nil, want empty maps")
		}
		e1, err := json.Marshal(inv)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", inv, err)
		}
		inv2, err := DecodeInvocation(e1)
		if err != nil {
			t.Fatalf("decoding the re-encoding %s: %v", e1, err)
		}
		if !reflect.DeepEqual(keysOf(inv.Data), keysOf(inv2.Data)) || !reflect.DeepEqual(keysOf(inv.Metadata), keysOf(inv2.Metadata)) {
			t.Fatalf("keys changed: %s then %s", body, e1)
		}
		e2, err := json.Marshal(inv2)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s (%v)", e1, e2, err)
		}
	})
}

// checkPlainString: where the fast string decoder accepts t, encoding/json
// must give the same string.
func checkPlainString(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := plainString(bytes.Trim(raw, jsonSpace))
	if !ok {
		return
	}
	var want string
	if err := json.Unmarshal(raw, &want); err != nil || got != want {
		t.Fatalf("plainString(%q) = %q, encoding/json %q, %v", raw, got, want, err)
	}
}

func TestPlainString(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{`"o-1"`, "o-1", true},
		{`"\"o-1\""`, `"o-1"`, true},
		{`"a\\b\/c"`, `a\b/c`, true},
		{`"ünïcode"`, "ünïcode", true},
		{`""`, "", true},
		{`"\u0041"`, "", false},
		{`"tab\t"`, "", false},
		{`"ab\"`, "", false},
		{`"a"b"`, "", false},
		{"\"\xff\"", "", false},
		{"\"line\nbreak\"", "", false},
		{`"unterminated`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := plainString([]byte(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("plainString(%s) = %q, %t; want %q, %t", tt.in, got, ok, tt.want, tt.wantOK)
			}
			checkPlainString(t, []byte(tt.in))
		})
	}
}
