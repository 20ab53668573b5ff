package hostenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// The bindings the tests encode for, and the golden files they are held
// to: package hostproto's, which its decoder tests read.
const (
	serviceBusBind = "message"
	timerBind      = "timer"
	goldenDir      = "../../hostproto/testdata"
)

// The canonical invocations: what the golden files servicebus_session.json
// and timer_tick.json hold (hostproto's TestGoldenDecodesToCanonical
// decodes them to the same values), so that the development host provably
// sends what the decoder is tested on.
var (
	canonicalNow      = time.Date(2026, 11, 29, 10, 20, 31, 123456700, time.UTC)
	canonicalTimerNow = time.Date(2026, 11, 29, 10, 20, 0, 3456700, time.UTC)
)

func canonicalMessage() hostproto.ServiceBusMessage {
	return hostproto.ServiceBusMessage{
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

func canonicalTimer() hostproto.TimerInfo {
	return hostproto.TimerInfo{
		AdjustForDST: true,
		Last:         time.Date(2026, 11, 29, 10, 15, 0, 1234500, time.UTC),
		Next:         time.Date(2026, 11, 29, 10, 25, 0, 0, time.UTC),
		LastUpdated:  time.Date(2026, 11, 29, 10, 15, 0, 9876500, time.UTC),
	}
}

// assertMessage fails t unless got equals want field by field.
func assertMessage(t *testing.T, got, want hostproto.ServiceBusMessage) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("message =\n%+v\nwant\n%+v", got, want)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// normalizeJSON re-encodes a JSON document with sorted keys and no
// insignificant whitespace, so that equal documents compare byte for byte.
func normalizeJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("normalizing %s: %v", b, err)
	}
	out, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEncodersMatchGoldenFiles(t *testing.T) {
	sb, err := EncodeServiceBus(canonicalMessage(), serviceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		t.Fatal(err)
	}
	timer, err := EncodeTimer(canonicalTimer(), timerBind, "DeadLetterSweeper", canonicalTimerNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file string
		got  []byte
	}{
		{"servicebus_session.json", sb},
		{"timer_tick.json", timer},
	} {
		t.Run(tt.file, func(t *testing.T) {
			want := normalizeJSON(t, readFile(t, filepath.Join(goldenDir, tt.file)))
			if got := normalizeJSON(t, tt.got); !bytes.Equal(got, want) {
				t.Errorf("encoder output, normalised:\n%s\nwant (%s/%s, normalised):\n%s", got, goldenDir, tt.file, want)
			}
		})
	}
}

// TestQuoteJSONFastPath checks quoteJSON, with its shortcut for plain
// ASCII, against the encoder it shortcuts.
func TestQuoteJSONFastPath(t *testing.T) {
	for _, s := range []string{
		"", "order-42", "OrderStatusChanged", "a b<c>&d", "~!@#$%^*()_+{}|:?`", "quote\"inside",
		`back\slash`, "tab\there", "new\nline", "del\x7f", "ünïcödé", "\u2028sep", "bad\xffutf8", "\x00",
	} {
		t.Run(s, func(t *testing.T) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			want := string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
			if got := quoteJSON(s); got != want {
				t.Errorf("quoteJSON(%q) = %s, want %s", s, got, want)
			}
		})
	}
}

// TestGUIDForm: a uuid.UUID, as newSys builds RandGuid from hash bytes,
// writes its bytes in order as lower-case 8-4-4-4-12 hex digits (what the
// hand-written formatter it replaced wrote).
func TestGUIDForm(t *testing.T) {
	for _, g := range []uuid.UUID{
		{},
		{0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0xff, 0x10, 0x7f},
	} {
		want := fmt.Sprintf("%x-%x-%x-%x-%x", g[0:4], g[4:6], g[6:8], g[8:10], g[10:16])
		if got := g.String(); got != want {
			t.Errorf("uuid.UUID(%x).String() = %s, want %s", g[:], got, want)
		}
	}
}

var guid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewGUID(t *testing.T) {
	a, b := NewGUID(), NewGUID()
	if !guid4.MatchString(a) || !guid4.MatchString(b) || a == b {
		t.Errorf("NewGUID = %q, %q; want two different lower-case version 4 GUIDs", a, b)
	}
}

// TestRandGUID: sys.RandGuid is a version 4 GUID derived from newSys's
// arguments alone.
func TestRandGUID(t *testing.T) {
	a, err := newSys("OrderStatus", canonicalNow, "o-1:2", "17", "1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSys("OrderStatus", canonicalNow, "o-1:2", "17", "1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newSys("OrderStatus", canonicalNow, "o-1:2", "17", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !guid4.MatchString(a.RandGuid) || a != b || a.RandGuid == c.RandGuid {
		t.Errorf("RandGuid = %q, %q, %q; want a version 4 GUID, the same for the same arguments only", a.RandGuid, b.RandGuid, c.RandGuid)
	}
}
