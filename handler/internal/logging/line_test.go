package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// field is one field of a line, of one of Line's kinds.
type field struct {
	key  string
	kind byte // 's', 'i', 'f', 'b'
	s    string
	i    int64
	f    float64
	b    bool
}

func (f field) add(l *Line) {
	switch f.kind {
	case 's':
		l.Str(f.key, f.s)
	case 'i':
		l.Int(f.key, f.i)
	case 'f':
		l.Float(f.key, f.f)
	case 'b':
		l.Bool(f.key, f.b)
	}
}

func (f field) attr() slog.Attr {
	switch f.kind {
	case 's':
		return slog.String(f.key, f.s)
	case 'i':
		return slog.Int64(f.key, f.i)
	case 'f':
		return slog.Float64(f.key, f.f)
	}
	return slog.Bool(f.key, f.b)
}

// fixClock makes Line's clock return t until the test ends.
func fixClock(t testing.TB, at time.Time) {
	old := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = old })
}

// viaLine is what Line writes for the record on a logger from New with
// the With attributes with, and on which stream.
func viaLine(t testing.TB, at time.Time, with []any, level slog.Level, msg string, fs []field) (out, errOut string) {
	fixClock(t, at)
	var o, e bytes.Buffer
	l := Begin(New(&o, &e, slog.LevelDebug).With(with...), level, msg)
	if l == nil || l.h == nil {
		t.Fatalf("Begin on New's logger did not take the fast path")
	}
	for _, f := range fs {
		f.add(l)
	}
	l.Write()
	return o.String(), e.String()
}

// viaSlog is what slog's own JSON handler writes for the same record, on
// the stream New sends it to (an Error through New's "warn" rewrite).
func viaSlog(at time.Time, with []any, level slog.Level, msg string, fs []field) (out, errOut string) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	r := slog.NewRecord(at, level, msg, 0)
	for _, f := range fs {
		r.AddAttrs(f.attr())
	}
	_ = slog.New(h).With(with...).Handler().Handle(context.Background(), r)
	switch {
	case level >= slog.LevelError:
		var e bytes.Buffer
		_, _ = noWarn{&e}.Write(buf.Bytes())
		return "", e.String()
	case level >= slog.LevelWarn:
		return "", buf.String()
	}
	return buf.String(), ""
}

// TestLineIsSlogsLine: for every kind of field and the strings that need
// escaping, Line writes the bytes slog's JSON handler writes for the same
// record, on the same stream.
func TestLineIsSlogsLine(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 11, 12, 345678901, time.FixedZone("X", 3600))
	settled := []field{
		{key: "order_id", kind: 's', s: "o-0001"}, {key: "message_id", kind: 's', s: "o-0001:2"},
		{key: "delivery_count", kind: 'i', i: 1}, {key: "sequence", kind: 'i', i: 2},
		{key: "subject", kind: 's', s: "OrderStatusChanged"}, {key: "result", kind: 's', s: "Applied"},
		{key: "duration_ms", kind: 'f', f: 9.723}, {key: "round_trips", kind: 'i', i: 1},
		{key: "status", kind: 's', s: "Paid"}, {key: "cache_hit", kind: 'b', b: true},
		{key: "lag_ms", kind: 'i', i: 12},
	}
	tests := []struct {
		name  string
		with  []any
		level slog.Level
		msg   string
		fs    []field
	}{
		{"settled", []any{KeyInstanceID, "instance-1"}, slog.LevelInfo, "message settled", settled},
		{"no with", nil, slog.LevelInfo, "message settled", settled},
		{"several with", []any{"a", 1, "b", true, "c", 2.5, "d", uint64(7), "e", "x\"y"}, slog.LevelDebug, "m", settled[:2]},
		{"no fields", nil, slog.LevelInfo, "", nil},
		{"warn", []any{KeyInstanceID, "i"}, slog.LevelWarn, "message parked on the poison queue",
			[]field{{key: "reason", kind: 's', s: "InvalidPayload"}, {key: "description", kind: 's', s: "bad \"json\"\n\tat <1> & more"}}},
		{"error that says warning", nil, slog.LevelError, "message failed, a WARNING",
			[]field{{key: "error", kind: 's', s: "Warn: lock lost; rewarned"}, {key: "warn", kind: 'b', b: false}}},
		{"escapes", nil, slog.LevelInfo, "\x00\x1f\x7f\u2028\u2029\xff\xfe é 日本",
			[]field{{key: "k\"\\/", kind: 's', s: "\r\n\t\b\f\u00e9\xc3"}, {key: "", kind: 's', s: ""}}},
		{"numbers", nil, slog.LevelInfo, "n", []field{
			{key: "zero", kind: 'f', f: 0}, {key: "neg", kind: 'f', f: math.Copysign(0, -1)},
			{key: "tiny", kind: 'f', f: 1e-7}, {key: "edge", kind: 'f', f: 1e-6}, {key: "big", kind: 'f', f: 1e21},
			{key: "below", kind: 'f', f: 999999999999999999999}, {key: "third", kind: 'f', f: 1.0 / 3},
			{key: "nan", kind: 'f', f: math.NaN()}, {key: "inf", kind: 'f', f: math.Inf(-1)},
			{key: "min", kind: 'i', i: math.MinInt64}, {key: "max", kind: 'i', i: math.MaxInt64},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotOut, gotErr := viaLine(t, at, tt.with, tt.level, tt.msg, tt.fs)
			wantOut, wantErr := viaSlog(at, tt.with, tt.level, tt.msg, tt.fs)
			if gotOut != wantOut || gotErr != wantErr {
				t.Errorf("Line wrote\n out %q\n err %q\nslog writes\n out %q\n err %q", gotOut, gotErr, wantOut, wantErr)
			}
		})
	}
}

// FuzzLineIsSlogsLine: whatever the keys, strings and numbers, Line's
// bytes are slog's.
func FuzzLineIsSlogsLine(f *testing.F) {
	f.Add("message settled", "order_id", "o-1", int64(3), 9.723, true, 0, "instance-1")
	f.Add("warn\u2028", "k\x00", "\xff<&>\"\\", int64(-1), 1e-7, false, 8, "")
	f.Add("", "", "", int64(0), math.Inf(1), false, 4, "warn")
	f.Fuzz(func(t *testing.T, msg, key, s string, i int64, fl float64, b bool, level int, instance string) {
		at := time.Unix(1764583872, int64(uint64(i)%1e9)).UTC()
		lv := slog.Level((level%16+16)%16 - 4) // Debug (-4) to 11: all enabled
		var with []any
		if instance != "" {
			with = []any{KeyInstanceID, instance}
		}
		fs := []field{{key: key, kind: 's', s: s}, {key: key + "i", kind: 'i', i: i},
			{key: "f" + key, kind: 'f', f: fl}, {key: key, kind: 'b', b: b}, {key: s, kind: 's', s: key}}
		gotOut, gotErr := viaLine(t, at, with, lv, msg, fs)
		wantOut, wantErr := viaSlog(at, with, lv, msg, fs)
		if gotOut != wantOut || gotErr != wantErr {
			t.Fatalf("Line wrote\n out %q\n err %q\nslog writes\n out %q\n err %q", gotOut, gotErr, wantOut, wantErr)
		}
		line := gotOut + gotErr
		if strings.Count(line, "\n") != 1 || !json.Valid([]byte(line)) {
			t.Fatalf("not one JSON line: %q", line)
		}
	})
}

// TestLineThroughSlogElsewhere: on a logger not from New (or one with a
// group), Line logs the same record through slog.
func TestLineThroughSlogElsewhere(t *testing.T) {
	noTime := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	var got, want bytes.Buffer
	for _, c := range []struct {
		name string
		log  func(io.Writer) *slog.Logger
	}{
		{"text handler", func(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, noTime)) }},
		{"json handler with a group", func(w io.Writer) *slog.Logger {
			return slog.New(slog.NewJSONHandler(w, noTime)).WithGroup("g")
		}},
	} {
		got.Reset()
		want.Reset()
		Begin(c.log(&got), slog.LevelWarn, "m").Str("a", "x y").Int("b", 2).Float("c", 0.5).Bool("d", true).Write()
		c.log(&want).Warn("m", "a", "x y", "b", 2, "c", 0.5, "d", true)
		if got.String() != want.String() || got.Len() == 0 {
			t.Errorf("%s: Line wrote %q, slog writes %q", c.name, got.String(), want.String())
		}
	}
	// A group or an attribute Line does not encode on New's logger.
	for _, log := range []*slog.Logger{
		New(&got, nil, slog.LevelInfo).WithGroup("g"),
		New(&got, nil, slog.LevelInfo).With("d", time.Second),
	} {
		got.Reset()
		l := Begin(log, slog.LevelInfo, "m")
		if l.h != nil {
			t.Fatalf("fast path on a logger with a group or a duration")
		}
		l.Int("n", 1).Write()
		var rec map[string]any
		if err := json.Unmarshal(got.Bytes(), &rec); err != nil || rec["msg"] != "m" {
			t.Errorf("through slog: %q, %v", got.String(), err)
		}
	}
}

func TestLineDisabled(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, nil, slog.LevelWarn)
	l := Begin(log, slog.LevelInfo, "hidden")
	if l != nil {
		t.Fatalf("Begin below the level = %v, want nil", l)
	}
	l.Str("a", "b").Int("c", 1).Float("d", 2).Bool("e", true).Write() // a nil Line does nothing
	if out.Len() != 0 {
		t.Errorf("a disabled line wrote %q", out.String())
	}
}

// TestLinesNeverInterleave: Lines and slog's records written at once on
// one logger come out as whole lines, each once (run with -race).
func TestLinesNeverInterleave(t *testing.T) {
	var out, errOut bytes.Buffer
	log := New(&out, &errOut, slog.LevelInfo).With(KeyInstanceID, "instance-1")
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				long := strings.Repeat("x", 5000) // above PIPE_BUF: one Write still
				switch i % 3 {
				case 0:
					Begin(log, slog.LevelInfo, "line").Int("w", int64(w)).Int("i", int64(i)).Str("long", long).Write()
				case 1:
					Begin(log, slog.LevelWarn, "line").Int("w", int64(w)).Int("i", int64(i)).Write()
				default:
					log.Info("line", "w", w, "i", i, "long", long)
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, s := range strings.Split(strings.TrimSpace(out.String())+"\n"+strings.TrimSpace(errOut.String()), "\n") {
		var rec struct {
			W, I     int
			Instance string `json:"instance_id"`
		}
		if err := json.Unmarshal([]byte(s), &rec); err != nil || rec.Instance != "instance-1" {
			t.Fatalf("not a whole line: %.80q...: %v", s, err)
		}
		seen[fmt.Sprint(rec.W, rec.I)]++
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct lines, want %d", len(seen), writers*each)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("line %s written %d times", k, n)
		}
	}
}

// settledLine writes a settled line with the fields orderfn gives it.
func settledLine(l *Line) {
	l.Str("order_id", "o-0001").Str("message_id", "o-0001:2").Int("delivery_count", 1).Int("sequence", 2).
		Str("subject", "OrderStatusChanged").Str("result", "Applied").Float("duration_ms", 9.723).
		Int("round_trips", 1).Str("status", "Paid").Bool("cache_hit", true).
		Str("invocation_id", "6a1f3b1e-0c1d-4d6e-9f00-123456789abc").Str("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736").
		Str("operation_id", "0af7651916cd43dd8448eb211c80319c").Int("lag_ms", 12).Int("occurred_lag_ms", 30).Write()
}

// BenchmarkSettledLine is the settled line's cost: through slog as
// orderfn wrote it (a []any of attributes), and with Line.
func BenchmarkSettledLine(b *testing.B) {
	log := New(io.Discard, io.Discard, slog.LevelInfo).With(KeyInstanceID, "instance-1")
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			log.Info("message settled", "order_id", "o-0001", "message_id", "o-0001:2", "delivery_count", int32(1),
				"sequence", int64(2), "subject", "OrderStatusChanged", "result", "Applied", "duration_ms", 9.723,
				"round_trips", 1, "status", "Paid", "cache_hit", true, "invocation_id", "6a1f3b1e-0c1d-4d6e-9f00-123456789abc",
				"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", "operation_id", "0af7651916cd43dd8448eb211c80319c",
				"lag_ms", int64(12), "occurred_lag_ms", int64(30))
		}
	})
	b.Run("line", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			settledLine(Begin(log, slog.LevelInfo, "message settled"))
		}
	})
}
