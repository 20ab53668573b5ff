package devhost

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/logging"
)

// decodeSettled is parseSettled's reference: the whole line decoded, as
// the dev host read it before.
func decodeSettled(l []byte) (settled, bool) {
	var rec struct {
		MessageID  *string `json:"message_id"`
		Result     string  `json:"result"`
		RoundTrips int     `json:"round_trips"`
		Conflicts  int     `json:"etag_conflicts"`
		CacheHit   bool    `json:"cache_hit"`
	}
	if json.Unmarshal(l, &rec) != nil || rec.MessageID == nil || rec.Result == "" {
		return settled{}, false
	}
	return settled{result: rec.Result, roundTrips: rec.RoundTrips, conflicts: rec.Conflicts, cacheHit: rec.CacheHit}, true
}

func TestParseSettled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want settled
		ok   bool
	}{
		{`{"msg":"message settled","message_id":"o-1:2","result":"Applied","round_trips":3,"etag_conflicts":1,"cache_hit":true}`, settled{"Applied", 3, 1, true}, true},
		{`{"msg":"message settled","message_id":"o-1:3","result":"Stale","round_trips":1}`, settled{"Stale", 1, 0, false}, true},
		{`{"message_id":"","result":"Applied","round_trips":0}`, settled{"Applied", 0, 0, false}, true},
		{`{"message_id":"a\"b","result":"Appl\u0069ed","round_trips":-0,"cache_hit":false}`, settled{"Applied", 0, 0, false}, true},
		{`{"message_id":"x","result":"Applied","round_trips":null,"etag_conflicts":null,"cache_hit":null}`, settled{"Applied", 0, 0, false}, true},
		// A field's look-alike inside a string is not the field.
		{`{"message_id":"x","description":"a,\"round_trips\":9,\"cache_hit\":true","result":"Parked","round_trips":2}`, settled{"Parked", 2, 0, false}, true},
		{`{"message_id":"x","result":"Applied","round_trips":1}` + " \r", settled{"Applied", 1, 0, false}, true},
		// Not counted, as a decode would not count them.
		{`{"message_id":null,"result":"Applied","round_trips":1}`, settled{}, false},
		{`{"result":"Applied","round_trips":1}`, settled{}, false},
		{`{"message_id":"x","result":"","round_trips":1}`, settled{}, false},
		{`{"message_id":"x","result":7,"round_trips":1}`, settled{}, false},
		{`{"message_id":7,"result":"Applied","round_trips":1}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":"1"}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":1.5}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":1e2}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":01}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":99999999999999999999}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":1,"cache_hit":"true"}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":1,"etag_conflicts":true}`, settled{}, false},
		{`{"message_id":"x","result":"Applied","round_trips":1`, settled{}, false},
		{`"message_id":"x","result":"Applied","round_trips":1}`, settled{}, false},
		{``, settled{}, false},
	} {
		got, ok := parseSettled([]byte(tc.line))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseSettled(%s) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
		ref, refOK := decodeSettled([]byte(tc.line))
		if ref != got || refOK != ok {
			t.Errorf("%s: parseSettled %+v, %v; a decode %+v, %v", tc.line, got, ok, ref, refOK)
		}
	}
}

// FuzzParseSettled: on every line the handler's logger writes (fields in
// any content) and on every flat JSON object with each key once, reading
// the fields where they stand agrees with decoding the whole line.
func FuzzParseSettled(f *testing.F) {
	f.Add("o-1:2", "Applied", int64(1), int64(0), true, "", []byte(`{"message_id":"x","result":"Applied","round_trips":1}`))
	f.Add("a\"b,\"round_trips\":9", "Parked", int64(-3), int64(2), false, `,"cache_hit":true}`, []byte(`{"a":1,"message_id":"","result":"R","round_trips":null}`))
	f.Fuzz(func(t *testing.T, id, result string, trips, conflicts int64, hit bool, desc string, raw []byte) {
		var buf bytes.Buffer
		log := logging.New(&buf, io.Discard, slog.LevelInfo)
		l := logging.Begin(log, slog.LevelInfo, "message settled").Str("order_id", "o").Str("message_id", id).
			Str("result", result).Int("round_trips", trips).Str("description", desc)
		if hit {
			l.Bool("cache_hit", true)
		}
		if conflicts != 0 {
			l.Int("etag_conflicts", conflicts)
		}
		l.Write()
		for _, line := range [][]byte{bytes.TrimSuffix(buf.Bytes(), []byte("\n")), raw} {
			if !flatUniqueObject(line) {
				continue
			}
			got, ok := parseSettled(line)
			want, wantOK := decodeSettled(line)
			if got != want || ok != wantOK {
				t.Fatalf("%s: parseSettled %+v, %v; a decode %+v, %v", line, got, ok, want, wantOK)
			}
		}
	})
}

// flatUniqueObject reports whether line is one JSON object whose values
// are all scalars, each key once (the shape parseSettled reads), and
// nothing after it, with no key that only a case-blind match would take
// for one of the settled line's. Keys are compared as written, so a key spelled with
// escapes counts as another.
func flatUniqueObject(line []byte) bool {
	if !json.Valid(line) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		for _, name := range []string{"message_id", "result", "round_trips", "etag_conflicts", "cache_hit"} {
			if k, _ := key.(string); strings.EqualFold(k, name) && k != name {
				return false // a decode matches keys in any case; the handler writes them in one
			}
		}
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if _, ok := tok.(json.Delim); ok {
			return false
		}
		seen++
	}
	if seen != len(m) || bytes.Contains(line, []byte(`\u`)) && bytes.Contains(line, []byte(`"\u`)) {
		return false
	}
	return true
}
