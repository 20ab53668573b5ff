package tablestore

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

func TestClientOptionsTransport(t *testing.T) {
	co := clientOptions(nil)
	c, ok := co.Transport.(*http.Client)
	if !ok {
		t.Fatalf("default Transport is %T, want *http.Client", co.Transport)
	}
	tr, ok := c.Transport.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost != MaxIdleConnsPerHost || tr.TLSClientConfig == nil || tr.Proxy == nil {
		t.Fatalf("default transport = %+v, want %d idle connections per host, TLS config, proxy from the environment", c.Transport, MaxIdleConnsPerHost)
	}
	if clientOptions(nil).Transport == co.Transport {
		t.Error("two stores share one transport; want one each")
	}
	mine := &http.Client{}
	if got := clientOptions(&Options{ClientOptions: &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: mine}}}).Transport; got != mine {
		t.Errorf("Transport = %v, want the caller's", got)
	}
}

func TestEncodeColumns(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123000000, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		st   order.State
		want map[string]any
	}{
		{"all columns", order.State{Status: order.Paid, LastSequence: 1<<40 + 7, OccurredAt: at, UpdatedAt: at.Add(time.Second)}, map[string]any{
			"PartitionKey": "o'1", "RowKey": RowKey, colStatus: "Paid",
			colLastSequence: "1099511627783", colLastSequence + "@odata.type": "Edm.Int64",
			colOccurredAt: "2026-11-29T09:00:00.123Z", colOccurredAt + "@odata.type": "Edm.DateTime",
			colUpdatedAt: "2026-11-29T09:00:01.123Z", colUpdatedAt + "@odata.type": "Edm.DateTime",
		}},
		{"zero times left out", order.State{Status: order.Cancelled, LastSequence: 5}, map[string]any{
			"PartitionKey": "o'1", "RowKey": RowKey, colStatus: "Cancelled",
			colLastSequence: "5", colLastSequence + "@odata.type": "Edm.Int64",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encode("o'1", tt.st)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("encode = %s\nwant %v", b, tt.want)
			}
			// The same entity as the map-based encoder it replaced.
			var ref map[string]any
			if err := json.Unmarshal(mapEncode("o'1", tt.st), &ref); err != nil || !reflect.DeepEqual(got, ref) {
				t.Errorf("encode = %s, the map-based encoding %v (%v)", b, ref, err)
			}
			row, err := decode("o'1", b, "e")
			if err != nil || row.State.Status != tt.st.Status || row.State.LastSequence != tt.st.LastSequence ||
				!row.State.OccurredAt.Equal(tt.st.OccurredAt) || !row.State.UpdatedAt.Equal(tt.st.UpdatedAt) {
				t.Errorf("decode(encode) = %+v, %v; want %+v", row.State, err, tt.st)
			}
		})
	}
}

// mapEncode is the entity built as a map, as encode did before it used a
// struct.
func mapEncode(orderID string, st order.State) []byte {
	e := map[string]any{
		"PartitionKey":                  orderID,
		"RowKey":                        RowKey,
		colStatus:                       string(st.Status),
		colLastSequence:                 aztables.EDMInt64(st.LastSequence),
		colLastSequence + "@odata.type": "Edm.Int64",
	}
	for col, tm := range map[string]time.Time{colOccurredAt: st.OccurredAt, colUpdatedAt: st.UpdatedAt} {
		if !tm.IsZero() {
			e[col] = aztables.EDMDateTime(tm.UTC())
			e[col+"@odata.type"] = "Edm.DateTime"
		}
	}
	b, _ := json.Marshal(e)
	return b
}
