package outbox

import (
	"strings"
	"testing"
)

// TestEntitySizeCountsAsTableStorage: 4 bytes, the keys in UTF-16, and per
// property 8 bytes, its name in UTF-16 and its value by type (a string 4
// bytes and its UTF-16 code units, 2 bytes each: a character outside the
// BMP is a surrogate pair, 4 bytes).
func TestEntitySizeCountsAsTableStorage(t *testing.T) {
	const keys = `"PartitionKey":"p","RowKey":"r"` // 4 + (1+1)*2 = 8
	tests := []struct {
		name   string
		entity string
		want   int
	}{
		{"keys only", `{` + keys + `}`, 8},
		{"keys outside the BMP", `{"PartitionKey":"😀","RowKey":"r"}`, 4 + (2+1)*2},
		{"system properties and annotations are not properties", `{` + keys + `,"Timestamp":"2026-12-01T10:00:00Z","odata.etag":"W/\"x\"","odata.metadata":"m"}`, 8},
		{"an ASCII string", `{` + keys + `,"S":"abc"}`, 8 + 8 + 2 + 4 + 3*2},
		{"an empty string", `{` + keys + `,"S":""}`, 8 + 8 + 2 + 4},
		{"a BMP character is one unit", `{` + keys + `,"S":"é中"}`, 8 + 8 + 2 + 4 + 2*2},
		{"a character outside the BMP is two units", `{` + keys + `,"S":"😀"}`, 8 + 8 + 2 + 4 + 2*2},
		{"an escaped surrogate pair is two units", `{` + keys + `,"S":"\ud83d\ude00"}`, 8 + 8 + 2 + 4 + 2*2},
		{"a name in UTF-16", `{` + keys + `,"Größe":"x"}`, 8 + 8 + 5*2 + 4 + 2},
		{"an explicit Edm.String", `{` + keys + `,"S":"ab","S@odata.type":"Edm.String"}`, 8 + 8 + 2 + 4 + 2*2},
		{"Int32 without a type", `{` + keys + `,"N":5}`, 8 + 8 + 2 + 4},
		{"a negative Int32", `{` + keys + `,"N":-2147483648}`, 8 + 8 + 2 + 4},
		{"a number past Int32 is a Double", `{` + keys + `,"N":3000000000}`, 8 + 8 + 2 + 8},
		{"a Double", `{` + keys + `,"N":5.5}`, 8 + 8 + 2 + 8},
		{"Int64", `{` + keys + `,"N":"123","N@odata.type":"Edm.Int64"}`, 8 + 8 + 2 + 8},
		{"DateTime", `{` + keys + `,"T":"2026-12-01T10:00:00Z","T@odata.type":"Edm.DateTime"}`, 8 + 8 + 2 + 8},
		{"Guid", `{` + keys + `,"G":"c9da6455-213d-42c9-9a79-3e9149a57833","G@odata.type":"Edm.Guid"}`, 8 + 8 + 2 + 16},
		{"Binary: its bytes and 4", `{` + keys + `,"B":"AQID","B@odata.type":"Edm.Binary"}`, 8 + 8 + 2 + 4 + 3},
		{"Boolean", `{` + keys + `,"F":true}`, 8 + 8 + 2 + 1},
		{"null counts its name", `{` + keys + `,"Z":null}`, 8 + 8 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _, err := entitySize([]byte(tt.entity))
			if err != nil || got != tt.want {
				t.Errorf("entitySize(%s) = %d, %v; want %d", tt.entity, got, err, tt.want)
			}
		})
	}
	if _, _, _, err := entitySize([]byte(`{"PartitionKey":`)); err == nil {
		t.Errorf("entitySize of a cut JSON: no error")
	}
	// 400,000 CJK characters are 1.2 MB in UTF-8, 800,000 bytes in UTF-16:
	// within the limit, as Table Storage counts.
	cjk := `{` + keys + `,"S":"` + strings.Repeat("中", 400_000) + `"}`
	if got, _, _, err := entitySize([]byte(cjk)); err != nil || got > MaxEntityBytes {
		t.Errorf("400,000 CJK characters: %d bytes, %v; want within %d", got, err, MaxEntityBytes)
	}
}

// TestLargestProperty: a string counts 2 bytes per UTF-16 code unit, a
// binary its decoded bytes; keys, annotations and other types do not
// count; 64 KiB exactly is within MaxPropertyBytes.
func TestLargestProperty(t *testing.T) {
	const keys = `"PartitionKey":"p","RowKey":"r"`
	tests := []struct {
		name, entity, wantName string
		want                   int
	}{
		{"none", `{` + keys + `,"N":5,"F":true}`, "", 0},
		{"the largest string", `{` + keys + `,"A":"ab","B":"abc"}`, "B", 6},
		{"outside the BMP", `{` + keys + `,"E":"😀"}`, "E", 4},
		{"binary by its bytes", `{` + keys + `,"B":"AQID","B@odata.type":"Edm.Binary"}`, "B", 3},
		{"Int64 as a string is not counted", `{` + keys + `,"N":"1234567890","N@odata.type":"Edm.Int64"}`, "", 0},
		{"32 K code units: 64 KiB", `{` + keys + `,"S":"` + strings.Repeat("x", 32<<10) + `"}`, "S", MaxPropertyBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, name, n, _ := entitySize([]byte(tt.entity)); name != tt.wantName || n != tt.want {
				t.Errorf("entitySize's largest property = %q, %d; want %q, %d", name, n, tt.wantName, tt.want)
			}
		})
	}
}
