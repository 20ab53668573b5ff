package hostproto

import (
	"reflect"
	"testing"
)

// TestDecodeInvocationOnePassMatchesChecked: where the one-pass scanner
// accepts an invocation, it gives what the checked decoder gives, on the
// shapes a hand-rolled scanner gets wrong.
func TestDecodeInvocationOnePassMatchesChecked(t *testing.T) {
	tests := []struct {
		name, body  string
		wantOnePass bool
	}{
		{"usual", `{"Data":{"message":"AA=="},"Metadata":{"SessionId":"o-1","DeliveryCount":3,"sys":{"MethodName":"OrderStatus"}}}`, true},
		{"whitespace everywhere", " \n{ \"Data\" :\t{ \"message\" : \"AA==\" } , \"Metadata\" : { } }\r\n", true},
		{"empty", `{}`, true},
		{"nulls", `{"Data":null,"Metadata":{"To":null}}`, true},
		{"duplicate keys, the last wins", `{"Data":{"a":1,"a":2},"Data":{"b":[1,{"c":"}"}]},"Metadata":{"x":"1"}}`, true},
		{"braces and escapes in strings", `{"Data":{"m":"{[\"\\\"}]"},"Metadata":{"k":"\\\\","n":-1.5e+3,"t":true,"f":false}}`, true},
		{"other top-level values", `{"Data":{},"Other":[1,"x"],"N":5}`, true},
		{"escaped key", `{"Data":{"m\u0065ssage":"AA=="}}`, false},
		{"escaped top-level key", `{"D\u0061ta":{"message":"AA=="}}`, false},
		{"non-ASCII key", `{"Data":{"mé":"AA=="}}`, false},
		{"Data not an object", `{"Data":"x"}`, false},
		{"invalid JSON", `{"Data":{}`, false},
		{"trailing garbage", `{"Data":{}} x`, false},
		{"not an object", `[1]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast, ok := decodeInvocationOnePass([]byte(tt.body))
			if ok != tt.wantOnePass {
				t.Fatalf("one pass ok = %v, want %v", ok, tt.wantOnePass)
			}
			if !ok {
				return
			}
			slow, err := decodeInvocationChecked([]byte(tt.body))
			if err != nil {
				t.Fatalf("checked decoder: %v", err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("one pass gives %+v, the checked decoder %+v", fast, slow)
			}
		})
	}
}
