package hostproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// assertMessage fails t unless got equals want field by field.
func assertMessage(t *testing.T, got, want ServiceBusMessage) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := marshalIndent(viewMessage(got))
		w, _ := marshalIndent(viewMessage(want))
		t.Errorf("message =\n%s\nwant\n%s", g, w)
	}
}

// canonicalInvocation is the canonical session invocation, as the
// development host's encoder writes it (testdata/servicebus_session.json).
func canonicalInvocation(t testing.TB) []byte {
	t.Helper()
	return readFile(t, filepath.Join(goldenDir, "servicebus_session.json"))
}

// invocationWith returns the canonical session invocation with Metadata
// keys replaced by the given raw JSON values ("" deletes the key).
func invocationWith(t *testing.T, metadata map[string]string) []byte {
	t.Helper()
	body := canonicalInvocation(t)
	var inv Invocation
	if err := json.Unmarshal(body, &inv); err != nil {
		t.Fatal(err)
	}
	for k, v := range metadata {
		if v == "" {
			delete(inv.Metadata, k)
		} else {
			inv.Metadata[k] = json.RawMessage(v)
		}
	}
	out, err := json.Marshal(inv)
	if err != nil {
		t.Fatalf("building invocation: %v", err)
	}
	return out
}

func decodeWith(t *testing.T, metadata map[string]string) ServiceBusMessage {
	t.Helper()
	m, err := DecodeServiceBus(invocationWith(t, metadata), serviceBusBind)
	if err != nil {
		t.Fatalf("DecodeServiceBus: %v", err)
	}
	return m
}

func TestDecodeServiceBusCanonical(t *testing.T) {
	assertMessage(t, decodeWith(t, nil), canonicalMessage())
}

// TestDecodeServiceBusLenientBareString: the host sends a string as a JSON
// string holding its JSON encoding ("\"o-1\""); a bare JSON string whose
// content is not itself a JSON string ("o-1") is taken as it is.
func TestDecodeServiceBusLenientBareString(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"host form", `"\"o-1\""`, "o-1"},
		{"bare", `"o-1"`, "o-1"},
		{"bare that looks like a number", `"123"`, "123"},
		{"bare that looks like null", `"null"`, "null"},
		{"bare with an unbalanced quote", `"\"o-1"`, `"o-1`},
		{"host form of the empty string", `"\"\""`, ""},
		{"host form with escapes", `"\"o-\\u00e9\\\"\""`, `o-é"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeWith(t, map[string]string{"SessionId": tt.raw})
			if m.SessionID != tt.want {
				t.Errorf("SessionId %s decodes to %q, want %q", tt.raw, m.SessionID, tt.want)
			}
		})
	}
}

// TestDecodeServiceBusLenientIntegers: the host sends "3"; a bare JSON
// number 3 and a doubly quoted "\"3\"" are accepted too.
func TestDecodeServiceBusLenientIntegers(t *testing.T) {
	tests := []struct {
		name, raw string
		want      int64
	}{
		{"host form", `"3"`, 3},
		{"bare number", `3`, 3},
		{"doubly quoted", `"\"3\""`, 3},
		{"negative", `"-1"`, -1},
		{"leading plus", `"+4"`, 4},
		{"leading zero", `"07"`, 7},
		{"null", `null`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeWith(t, map[string]string{"DeliveryCount": tt.raw, "SequenceNumber": tt.raw})
			if int64(m.DeliveryCount) != tt.want || m.SequenceNumber != tt.want {
				t.Errorf("%s decodes to DeliveryCount %d, SequenceNumber %d; want %d", tt.raw, m.DeliveryCount, m.SequenceNumber, tt.want)
			}
		})
	}
}

// TestDecodeServiceBusLenientTimes: the host sends whole seconds with no
// zone (UTC) or an offset; "Z", other offsets, fractional seconds and a
// JSON-quoted time (JsonConvert's form) are accepted too. The result is
// always UTC.
func TestDecodeServiceBusLenientTimes(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 20, 30, 0, time.UTC)
	tests := []struct {
		name, raw string
		want      time.Time
	}{
		{"no zone means UTC", `"2026-11-29T10:20:30"`, base},
		{"zero offset", `"2026-11-29T10:20:30+00:00"`, base},
		{"Z", `"2026-11-29T10:20:30Z"`, base},
		{"positive offset", `"2026-11-29T12:20:30+02:00"`, base},
		{"negative offset", `"2026-11-29T05:20:30-05:00"`, base},
		{"fraction without zone", `"2026-11-29T10:20:30.1234567"`, base.Add(123456700)},
		{"fraction with Z", `"2026-11-29T10:20:30.12Z"`, base.Add(120 * time.Millisecond)},
		{"nanoseconds", `"2026-11-29T10:20:30.123456789+00:00"`, base.Add(123456789)},
		{"JSON-quoted", `"\"2026-11-29T10:20:30Z\""`, base},
		{".NET MinValue is zero", `"0001-01-01T00:00:00"`, time.Time{}},
		{"null falls back to EnqueuedTime", `null`, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeWith(t, map[string]string{"EnqueuedTimeUtc": tt.raw})
			if !m.EnqueuedTime.Equal(tt.want) || m.EnqueuedTime.Location() != time.UTC {
				t.Errorf("EnqueuedTimeUtc %s decodes to %v, want %v in UTC", tt.raw, m.EnqueuedTime, tt.want)
			}
		})
	}
}

// TestDecodeServiceBusLenientPropertiesAsString: ApplicationProperties is a
// real JSON object; a JSON string holding one is accepted too.
func TestDecodeServiceBusLenientPropertiesAsString(t *testing.T) {
	m := decodeWith(t, map[string]string{"ApplicationProperties": `"{\"ReplayCount\":2}"`, "UserProperties": ""})
	if got := m.ApplicationProperties["ReplayCount"]; got != json.Number("2") {
		t.Errorf("ReplayCount = %#v, want json.Number(\"2\")", got)
	}
}

// TestDecodeServiceBusIgnoresMalformedSessionActions: SessionActions is the
// host's action object, read on a best-effort basis only.
func TestDecodeServiceBusIgnoresMalformedSessionActions(t *testing.T) {
	for _, raw := range []string{`"x"`, `[]`, `{"SessionLockedUntil":"soon"}`, `{"SessionLockedUntil":5}`, `{}`, `null`} {
		t.Run(raw, func(t *testing.T) {
			m := decodeWith(t, map[string]string{"SessionActions": raw})
			if !m.SessionLockedUntil.IsZero() {
				t.Errorf("SessionLockedUntil = %v, want zero", m.SessionLockedUntil)
			}
			want := canonicalMessage()
			want.SessionLockedUntil = time.Time{}
			assertMessage(t, m, want)
		})
	}
}

// TestDecodeServiceBusIgnoresUnknownKeys: keys the host may add (action and
// client objects, RetryContext, future keys) and the message's own
// top-level fields copied into Metadata change nothing.
func TestDecodeServiceBusIgnoresUnknownKeys(t *testing.T) {
	m := decodeWith(t, map[string]string{
		"MessageReceiver": `{"SessionLockedUntil":"bad"}`, "ReceiveActions": `{}`, "Client": `{"IsClosed":false}`,
		"RetryContext": `{"RetryCount":1}`, "orderId": `"\"o-2\""`, "sessionid": `"\"o-2\""`, "Future": `[1,{"a":null}]`,
	})
	assertMessage(t, m, canonicalMessage())
}

// TestDecodeServiceBusPrefersNewKeys: where the host sends a key and its
// alias, EnqueuedTimeUtc, ExpiresAtUtc, Subject and ApplicationProperties
// win; the alias is used when the key is missing or null.
func TestDecodeServiceBusPrefersNewKeys(t *testing.T) {
	t.Run("both present", func(t *testing.T) {
		m := decodeWith(t, map[string]string{
			"EnqueuedTime": `"2000-01-01T00:00:00+00:00"`, "ExpiresAt": `"2000-01-01T00:00:00+00:00"`,
			"Label": `"\"Old\""`, "UserProperties": `{"Old":true}`, "ApplicationProperties": `{"New":true}`,
		})
		want := canonicalMessage()
		want.ApplicationProperties = map[string]any{"New": true}
		assertMessage(t, m, want)
	})
	t.Run("only aliases", func(t *testing.T) {
		m := decodeWith(t, map[string]string{
			"EnqueuedTimeUtc": "", "EnqueuedTime": `"2026-11-29T11:20:30+01:00"`,
			"ExpiresAtUtc": "null", "ExpiresAt": `"2026-12-06T10:20:30+00:00"`,
			"Subject": "", "Label": `"\"OrderStatusChanged\""`,
			"ApplicationProperties": "null", "UserProperties": `{}`,
		})
		assertMessage(t, m, canonicalMessage())
	})
}

// TestDecodeServiceBusBodyIsStrictStdBase64: the host writes bodies with
// Convert.ToBase64String (standard alphabet, padded). Anything else is
// rejected rather than guessed at: it means a misconfigured trigger.
func TestDecodeServiceBusBodyIsStrictStdBase64(t *testing.T) {
	body := []byte{0xfb, 0xff, 0xfe, 'a'}
	tests := []struct {
		name, data string
		wantErr    bool
	}{
		{"standard padded", base64.StdEncoding.EncodeToString(body), false},
		{"empty", "", false},
		{"standard unpadded", base64.RawStdEncoding.EncodeToString(body), true},
		{"URL-safe padded", base64.URLEncoding.EncodeToString(body), true},
		{"URL-safe unpadded", base64.RawURLEncoding.EncodeToString(body), true},
		{"non-zero padding bits", "YR==", true},
		{"text", "hello world", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := fmt.Sprintf(`{"Data":{"message":%q},"Metadata":{}}`, tt.data)
			m, err := DecodeServiceBus([]byte(inv), serviceBusBind)
			if tt.wantErr {
				var de *DecodeError
				if !errors.As(err, &de) || de.Key != "Data.message" {
					t.Fatalf("error = %v, want a *DecodeError for Data.message", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := base64.StdEncoding.DecodeString(tt.data); !bytes.Equal(m.Body, want) {
				t.Errorf("Body = %x, want %x", m.Body, want)
			}
		})
	}
}

func TestDecodeServiceBusErrors(t *testing.T) {
	canonical := canonicalInvocation(t)
	tests := []struct {
		name    string
		body    []byte
		binding string
		wantKey string
	}{
		{"not JSON", []byte(`hello`), serviceBusBind, "body"},
		{"empty", nil, serviceBusBind, "body"},
		{"binding named otherwise", canonical, "msg", "Data.msg"},
		{"body double-encoded text", []byte(`{"Data":{"message":"{\"orderId\":\"o-1\"}"}}`), serviceBusBind, "Data.message"},
		{"body a number", []byte(`{"Data":{"message":5}}`), serviceBusBind, "Data.message"},
		{"body null", []byte(`{"Data":{"message":null}}`), serviceBusBind, "Data.message"},
		{"DeliveryCount text", invocationWith(t, map[string]string{"DeliveryCount": `"three"`}), serviceBusBind, "Metadata.DeliveryCount"},
		{"DeliveryCount overflow", invocationWith(t, map[string]string{"DeliveryCount": `"2147483648"`}), serviceBusBind, "Metadata.DeliveryCount"},
		{"DeliveryCount fraction", invocationWith(t, map[string]string{"DeliveryCount": `1.5`}), serviceBusBind, "Metadata.DeliveryCount"},
		{"DeliveryCount boolean", invocationWith(t, map[string]string{"DeliveryCount": `true`}), serviceBusBind, "Metadata.DeliveryCount"},
		{"SequenceNumber overflow", invocationWith(t, map[string]string{"SequenceNumber": `"9223372036854775808"`}), serviceBusBind, "Metadata.SequenceNumber"},
		{"SequenceNumber empty", invocationWith(t, map[string]string{"SequenceNumber": `""`}), serviceBusBind, "Metadata.SequenceNumber"},
		{"SessionId a number", invocationWith(t, map[string]string{"SessionId": `5`}), serviceBusBind, "Metadata.SessionId"},
		{"Subject an object", invocationWith(t, map[string]string{"Subject": `{}`}), serviceBusBind, "Metadata.Subject"},
		{"Label a number when Subject is missing", invocationWith(t, map[string]string{"Subject": "", "Label": `1`}), serviceBusBind, "Metadata.Label"},
		{"EnqueuedTimeUtc not a date", invocationWith(t, map[string]string{"EnqueuedTimeUtc": `"yesterday"`}), serviceBusBind, "Metadata.EnqueuedTimeUtc"},
		{"EnqueuedTimeUtc a number", invocationWith(t, map[string]string{"EnqueuedTimeUtc": `1764411630`}), serviceBusBind, "Metadata.EnqueuedTimeUtc"},
		{"EnqueuedTime past 9999 in UTC", invocationWith(t, map[string]string{"EnqueuedTimeUtc": "", "EnqueuedTime": `"9999-12-31T23:00:00-02:00"`}), serviceBusBind, "Metadata.EnqueuedTime"},
		{"ExpiresAtUtc local format", invocationWith(t, map[string]string{"ExpiresAtUtc": `"12/06/2026 10:20:30"`}), serviceBusBind, "Metadata.ExpiresAtUtc"},
		{"ApplicationProperties an array", invocationWith(t, map[string]string{"ApplicationProperties": `[]`}), serviceBusBind, "Metadata.ApplicationProperties"},
		{"ApplicationProperties a string of garbage", invocationWith(t, map[string]string{"ApplicationProperties": `"{x"`}), serviceBusBind, "Metadata.ApplicationProperties"},
		{"ApplicationProperties a string with trailing data", invocationWith(t, map[string]string{"ApplicationProperties": `"{} x"`}), serviceBusBind, "Metadata.ApplicationProperties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeServiceBus(tt.body, tt.binding)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeServiceBus = %+v, %v; want a *DecodeError for %s", m, err, tt.wantKey)
			}
			if de.Key != tt.wantKey {
				t.Errorf("error key = %q, want %q (error %v)", de.Key, tt.wantKey, err)
			}
			if prefix := "hostproto: " + tt.wantKey + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if !reflect.DeepEqual(m, ServiceBusMessage{}) {
				t.Errorf("DecodeServiceBus returned %+v with its error, want the zero value", m)
			}
		})
	}
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
