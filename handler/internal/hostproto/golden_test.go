package hostproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*.want.json from what the decoders return")

// Golden inputs are testdata/<name>.json, bodies as the host POSTs them;
// the prefix of <name> picks the decoder (servicebus_ with binding
// "message", timer_ with binding "timer", invocation_ for DecodeInvocation
// alone). testdata/<name>.want.json holds the decoded form, or {"error":..}.
const (
	goldenDir      = "testdata"
	wantSuffix     = ".want.json"
	serviceBusBind = "message"
	timerBind      = "timer"
)

// goldenInputs lists the golden input files, sorted.
func goldenInputs(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, p := range paths {
		if !strings.HasSuffix(p, wantSuffix) {
			inputs = append(inputs, p)
		}
	}
	sort.Strings(inputs)
	if len(inputs) == 0 {
		t.Fatalf("no golden inputs in %s", goldenDir)
	}
	return inputs
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// messageView is how a want file shows a ServiceBusMessage: the body as
// text when it is valid UTF-8, else as base64; times as RFC 3339, "" when
// zero.
type messageView struct {
	Body                  *string        `json:"Body,omitempty"`
	BodyBase64            *string        `json:"BodyBase64,omitempty"`
	MessageID             string         `json:"MessageID"`
	SessionID             string         `json:"SessionID"`
	Subject               string         `json:"Subject"`
	ContentType           string         `json:"ContentType"`
	CorrelationID         string         `json:"CorrelationID"`
	LockToken             string         `json:"LockToken"`
	ReplyTo               string         `json:"ReplyTo"`
	ReplyToSessionID      string         `json:"ReplyToSessionID"`
	To                    string         `json:"To"`
	PartitionKey          string         `json:"PartitionKey"`
	DeadLetterSource      string         `json:"DeadLetterSource"`
	DeliveryCount         int32          `json:"DeliveryCount"`
	SequenceNumber        int64          `json:"SequenceNumber"`
	EnqueuedTime          string         `json:"EnqueuedTime"`
	ExpiresAt             string         `json:"ExpiresAt"`
	ApplicationProperties map[string]any `json:"ApplicationProperties"`
	SessionLockedUntil    string         `json:"SessionLockedUntil"`
}

func viewTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

func viewMessage(m ServiceBusMessage) messageView {
	v := messageView{
		MessageID: m.MessageID, SessionID: m.SessionID, Subject: m.Subject, ContentType: m.ContentType,
		CorrelationID: m.CorrelationID, LockToken: m.LockToken, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		To: m.To, PartitionKey: m.PartitionKey, DeadLetterSource: m.DeadLetterSource,
		DeliveryCount: m.DeliveryCount, SequenceNumber: m.SequenceNumber,
		EnqueuedTime: viewTime(m.EnqueuedTime), ExpiresAt: viewTime(m.ExpiresAt),
		ApplicationProperties: m.ApplicationProperties, SessionLockedUntil: viewTime(m.SessionLockedUntil),
	}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		v.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Body)
		v.BodyBase64 = &s
	}
	return v
}

type timerView struct {
	IsPastDue    bool   `json:"IsPastDue"`
	AdjustForDST bool   `json:"AdjustForDST"`
	Last         string `json:"Last"`
	Next         string `json:"Next"`
	LastUpdated  string `json:"LastUpdated"`
}

// decodeGolden decodes one golden input with the decoder its name picks
// and renders the result as its want file holds it.
func decodeGolden(t *testing.T, name string, body []byte) []byte {
	t.Helper()
	var (
		v   any
		err error
	)
	switch {
	case strings.HasPrefix(name, "servicebus_"):
		var m ServiceBusMessage
		if m, err = DecodeServiceBus(body, serviceBusBind); err == nil {
			v = viewMessage(m)
		}
	case strings.HasPrefix(name, "timer_"):
		var ti TimerInfo
		if ti, err = DecodeTimer(body, timerBind); err == nil {
			v = timerView{ti.IsPastDue, ti.AdjustForDST, viewTime(ti.Last), viewTime(ti.Next), viewTime(ti.LastUpdated)}
		}
	case strings.HasPrefix(name, "invocation_"):
		v, err = DecodeInvocation(body)
	default:
		t.Fatalf("golden input %s: name must start with servicebus_, timer_ or invocation_", name)
	}
	if err != nil {
		if _, ok := err.(*DecodeError); !ok {
			t.Errorf("error %v is a %T, want *DecodeError", err, err)
		}
		v = map[string]string{"error": err.Error()}
	}
	if wantErr := strings.Contains(name, "_error_"); wantErr != (err != nil) {
		t.Errorf("error = %v; a name with _error_ must fail and only such a name", err)
	}
	out, err := marshalIndent(v)
	if err != nil {
		t.Fatalf("rendering %+v: %v", v, err)
	}
	return out
}

func marshalIndent(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// TestGolden decodes every golden input and compares the result with its
// want file. Run go test -update to rewrite the want files, then review
// the diff.
func TestGolden(t *testing.T) {
	inputs := goldenInputs(t)
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			got := decodeGolden(t, name, readFile(t, in))
			wantPath := filepath.Join(goldenDir, name+wantSuffix)
			if *update {
				if err := os.WriteFile(wantPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s decodes to\n%s\nwant (%s)\n%s", in, got, wantPath, want)
			}
		})
	}
	// Every want file belongs to an input.
	wants, _ := filepath.Glob(filepath.Join(goldenDir, "*"+wantSuffix))
	for _, w := range wants {
		in := strings.TrimSuffix(w, wantSuffix) + ".json"
		if _, err := os.Stat(in); err != nil {
			t.Errorf("%s has no input %s: delete it", w, in)
		}
	}
}

// The canonical invocations: what the golden files servicebus_session.json
// and timer_tick.json hold. Package hostenc's TestEncodersMatchGoldenFiles
// checks that its encoders write these files from the same values, so that
// the development host provably sends what the decoder is tested on.
func canonicalMessage() ServiceBusMessage {
	return ServiceBusMessage{
		Body:               []byte(`{"orderId":"o-1","status":"Paid","sequence":2}`),
		MessageID:          "o-1:2",
		SessionID:          "o-1",
		Subject:            "OrderStatusChanged",
		ContentType:        "application/json",
		LockToken:          "6a1f0c52-3b7e-4d0a-9c57-2f1e8d4b9a10",
		DeliveryCount:      1,
		SequenceNumber:     17,
		EnqueuedTime:       time.Date(2026, 11, 29, 10, 20, 30, 0, time.UTC),
		ExpiresAt:          time.Date(2026, 12, 6, 10, 20, 30, 0, time.UTC),
		SessionLockedUntil: time.Date(2026, 11, 29, 10, 21, 30, 0, time.UTC),
	}
}

func canonicalTimer() TimerInfo {
	return TimerInfo{
		AdjustForDST: true,
		Last:         time.Date(2026, 11, 29, 10, 15, 0, 1234500, time.UTC),
		Next:         time.Date(2026, 11, 29, 10, 25, 0, 0, time.UTC),
		LastUpdated:  time.Date(2026, 11, 29, 10, 15, 0, 9876500, time.UTC),
	}
}

// TestGoldenDecodesToCanonical ties the golden files to the canonical
// values: the session message, its full host payload with every unknown
// key, and the timer tick all decode to what the encoders were given.
func TestGoldenDecodesToCanonical(t *testing.T) {
	for _, file := range []string{"servicebus_session.json", "servicebus_unknown_keys.json", "servicebus_strings_bare.json", "servicebus_numbers_bare.json", "servicebus_numbers_quoted.json"} {
		t.Run(file, func(t *testing.T) {
			got, err := DecodeServiceBus(readFile(t, filepath.Join(goldenDir, file)), serviceBusBind)
			if err != nil {
				t.Fatal(err)
			}
			want := canonicalMessage()
			switch file {
			case "servicebus_unknown_keys.json":
				want.SessionLockedUntil = want.SessionLockedUntil.Add(123456700)
			case "servicebus_numbers_bare.json", "servicebus_numbers_quoted.json":
				want.DeliveryCount = 3
			}
			assertMessage(t, got, want)
		})
	}
	got, err := DecodeTimer(readFile(t, filepath.Join(goldenDir, "timer_tick.json")), timerBind)
	if err != nil {
		t.Fatal(err)
	}
	if want := canonicalTimer(); got != want {
		t.Errorf("timer_tick.json decodes to %+v, want %+v", got, want)
	}
}
