package devhost

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// settled is what the dev host counts from a handler's "message settled" line.
type settled struct {
	result     string
	roundTrips int
	conflicts  int
	cacheHit   bool
}

// parseSettled reads a settled line as a decode would, but finds the fields
// where they stand (logging.Line writes one flat JSON object a line). ok needs
// a string message_id and a non-empty result; a field of the wrong type refuses it.
func parseSettled(line []byte) (s settled, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return settled{}, false
	}
	if _, ok := stringField(line, "message_id"); !ok {
		return settled{}, false
	}
	raw, ok := stringField(line, "result")
	if !ok {
		return settled{}, false
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		if json.Unmarshal(raw, &s.result) != nil {
			return settled{}, false
		}
	} else {
		s.result = string(raw[1 : len(raw)-1])
	}
	if s.result == "" {
		return settled{}, false
	}
	if s.roundTrips, ok = intField(line, "round_trips"); !ok {
		return settled{}, false
	}
	if s.conflicts, ok = intField(line, "etag_conflicts"); !ok {
		return settled{}, false
	}
	switch v := value(line, "cache_hit"); string(v) {
	case "", "false", "null":
	case "true":
		s.cacheHit = true
	default:
		return settled{}, false
	}
	return s, true
}

// value returns the raw value of the top-level field key, up to the next
// comma or the closing brace outside a string; nil when the key is absent.
func value(line []byte, key string) []byte {
	i := fieldStart(line, key)
	if i < 0 {
		return nil
	}
	v := line[i:]
	if len(v) > 0 && v[0] == '"' {
		if n := stringEnd(v); n > 0 {
			return v[:n]
		}
		return v // unterminated: not a string
	}
	end := bytes.IndexAny(v, ",}")
	if end < 0 {
		return v
	}
	return bytes.TrimSpace(v[:end])
}

// fieldStart is the offset of key's value in line, -1 when absent.
func fieldStart(line []byte, key string) int {
	var buf [32]byte // the keys are short: the pattern stays off the heap
	for _, open := range []byte{',', '{'} {
		pat := append(append(append(buf[:0], open, '"'), key...), '"', ':')
		if i := bytes.Index(line, pat); i >= 0 {
			return i + len(pat)
		}
	}
	return -1
}

// stringEnd is the length of the JSON string at the start of v, quotes
// included; 0 when it does not end.
func stringEnd(v []byte) int {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return 0
}

// stringField returns key's value, quotes included, when it is a string.
func stringField(line []byte, key string) ([]byte, bool) {
	v := value(line, key)
	if len(v) < 2 || v[0] != '"' || stringEnd(v) != len(v) {
		return nil, false
	}
	return v, true
}

// intField returns key's value when it is a JSON integer that fits an
// int, and 0 when the key is absent or null (as a decode into an int).
func intField(line []byte, key string) (int, bool) {
	v := value(line, key)
	if v == nil || string(v) == "null" {
		return 0, true
	}
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}
