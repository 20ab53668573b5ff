package logging

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Line is one record built field by field and written in one Write with the bytes slog's
// JSON handler writes for it; on a logger from New it steadily allocates nothing, on another
// it goes through slog. A nil *Line does nothing; a Line belongs to one goroutine until Write.
type Line struct {
	log   *slog.Logger
	h     *handler // nil: through slog (attrs)
	level slog.Level
	msg   string
	buf   []byte
	attrs []slog.Attr
}

var now = time.Now

var linePool = sync.Pool{New: func() any { return &Line{buf: make([]byte, 0, 1024)} }}

// maxPooled bounds the buffers kept for reuse, as slog does.
const maxPooled = 16 << 10

// Begin starts a record at level with message msg on log; nil when level is off.
func Begin(log *slog.Logger, level slog.Level, msg string) *Line {
	if !log.Enabled(context.Background(), level) {
		return nil
	}
	l := linePool.Get().(*Line)
	l.log, l.level, l.msg, l.h = log, level, msg, nil
	h, ok := log.Handler().(*handler)
	t := now()
	if !ok || !h.fast || t.Year() < 0 || t.Year() >= 10000 {
		l.attrs = l.attrs[:0]
		return l
	}
	l.h = h
	b := append(l.buf[:0], `{"time":"`...)
	b = t.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendString(b, level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, msg)
	l.buf = append(b, h.pre...)
	return l
}

// Str adds the string field key.
func (l *Line) Str(key, v string) *Line {
	switch {
	case l == nil:
	case l.h == nil:
		l.attrs = append(l.attrs, slog.String(key, v))
	default:
		l.buf = appendString(l.key(key), v)
	}
	return l
}

// Int adds the integer field key.
func (l *Line) Int(key string, v int64) *Line {
	switch {
	case l == nil:
	case l.h == nil:
		l.attrs = append(l.attrs, slog.Int64(key, v))
	default:
		l.buf = strconv.AppendInt(l.key(key), v, 10)
	}
	return l
}

// Float adds the number field key, written as slog writes a float64 (NaN and ±Inf included).
func (l *Line) Float(key string, v float64) *Line {
	switch {
	case l == nil:
	case l.h == nil:
		l.attrs = append(l.attrs, slog.Float64(key, v))
	default:
		l.buf = appendFloat(l.key(key), v)
	}
	return l
}

// Bool adds the boolean field key.
func (l *Line) Bool(key string, v bool) *Line {
	switch {
	case l == nil:
	case l.h == nil:
		l.attrs = append(l.attrs, slog.Bool(key, v))
	default:
		l.buf = strconv.AppendBool(l.key(key), v)
	}
	return l
}

// Write writes the line in one Write (errors ignored, as slog does) and releases it.
func (l *Line) Write() {
	if l == nil {
		return
	}
	if l.h == nil {
		l.log.LogAttrs(context.Background(), l.level, l.msg, l.attrs...)
		clear(l.attrs)
	} else {
		l.buf = append(l.buf, '}', '\n')
		_, _ = l.h.sink(l.level).w.Write(l.buf)
	}
	l.log, l.h = nil, nil
	if cap(l.buf) <= maxPooled && cap(l.attrs) <= 64 {
		linePool.Put(l)
	}
}

func (l *Line) key(k string) []byte {
	return append(appendString(append(l.buf, ','), k), ':')
}

// appendAttr appends a With attribute as slog preformats it; false for a kind Line does not encode.
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	v := a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b, true // slog elides it
	}
	b = append(appendString(append(b, ','), a.Key), ':')
	switch v.Kind() {
	case slog.KindString:
		return appendString(b, v.String()), true
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	case slog.KindFloat64:
		return appendFloat(b, v.Float64()), true
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), true
	}
	return b, false
}

// appendFloat is encoding/json's floatEncoder, as slog uses it (NaN, ±Inf: slog's error string).
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return appendString(b, "!ERROR:json: unsupported value: "+strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as slog's JSON handler does (appendEscapedJSONString).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
