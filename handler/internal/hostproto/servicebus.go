package hostproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
)

// ServiceBusMessage is a Service Bus trigger's message as the host hands it to a custom
// handler; "" stands for a value left out, and times are UTC, to the second.
type ServiceBusMessage struct {
	Body []byte

	MessageID, SessionID, Subject, ContentType, CorrelationID, LockToken, ReplyTo, ReplyToSessionID, To, PartitionKey, DeadLetterSource string

	DeliveryCount  int32
	SequenceNumber int64

	EnqueuedTime, ExpiresAt time.Time

	// ApplicationProperties are the properties (numbers as json.Number), or nil.
	ApplicationProperties map[string]any

	// SessionLockedUntil is the session lock's expiry as the host saw it at
	// dispatch, read best-effort from SessionActions; zero when unknown.
	SessionLockedUntil time.Time
}

// DecodeServiceBus decodes an invocation of a Service Bus trigger whose binding is
// named binding and declared "dataType": "binary" (Data.<binding> is one standard,
// padded base64 string). Of a key and its older alias the first present wins:
// EnqueuedTimeUtc, ExpiresAtUtc, Subject, ApplicationProperties over EnqueuedTime,
// ExpiresAt, Label, UserProperties. Errors are *DecodeError.
func DecodeServiceBus(body []byte, binding string) (ServiceBusMessage, error) {
	inv, err := DecodeInvocation(body)
	if err != nil {
		return ServiceBusMessage{}, err
	}
	var m ServiceBusMessage
	if m.Body, err = dataBytes(inv.Data, binding); err != nil {
		return ServiceBusMessage{}, err
	}
	md := inv.Metadata
	for _, f := range []struct {
		dst  *string
		keys []string
	}{
		{&m.MessageID, []string{"MessageId"}},
		{&m.SessionID, []string{"SessionId"}},
		{&m.Subject, []string{"Subject", "Label"}},
		{&m.ContentType, []string{"ContentType"}},
		{&m.CorrelationID, []string{"CorrelationId"}},
		{&m.LockToken, []string{"LockToken"}},
		{&m.ReplyTo, []string{"ReplyTo"}},
		{&m.ReplyToSessionID, []string{"ReplyToSessionId"}},
		{&m.To, []string{"To"}},
		{&m.PartitionKey, []string{"PartitionKey"}},
		{&m.DeadLetterSource, []string{"DeadLetterSource"}},
	} {
		if *f.dst, err = metaString(md, firstPresent(md, f.keys...)); err != nil {
			return ServiceBusMessage{}, err
		}
	}
	n, err := metaInt(md, "DeliveryCount", 32)
	if err != nil {
		return ServiceBusMessage{}, err
	}
	m.DeliveryCount = int32(n)
	if m.SequenceNumber, err = metaInt(md, "SequenceNumber", 64); err != nil {
		return ServiceBusMessage{}, err
	}
	if m.EnqueuedTime, err = metaTime(md, firstPresent(md, "EnqueuedTimeUtc", "EnqueuedTime")); err != nil {
		return ServiceBusMessage{}, err
	}
	if m.ExpiresAt, err = metaTime(md, firstPresent(md, "ExpiresAtUtc", "ExpiresAt")); err != nil {
		return ServiceBusMessage{}, err
	}
	if m.ApplicationProperties, err = metaObject(md, firstPresent(md, "ApplicationProperties", "UserProperties")); err != nil {
		return ServiceBusMessage{}, err
	}
	m.SessionLockedUntil = sessionLockedUntil(md["SessionActions"])
	return m, nil
}

// firstPresent returns the first of keys md holds non-null, else keys[0].
func firstPresent(md map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		if raw, ok := md[k]; ok && !isNull(raw) {
			return k
		}
	}
	return keys[0]
}

// dataBytes decodes Data.<binding> as strict standard base64; "" is a nil body.
func dataBytes(data map[string]json.RawMessage, binding string) ([]byte, error) {
	key := "Data." + binding
	raw, ok := data[binding]
	if !ok || isNull(raw) {
		return nil, decodeErr(key, "missing (is the trigger's binding named %q?)", binding)
	}
	s, ok := jsonString(raw)
	if !ok {
		return nil, decodeErr(key, `want the body as a base64 string (declare "dataType": "binary" on the trigger), got %s`, snippetJSON(raw))
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, decodeErr(key, `not standard base64 (declare "dataType": "binary" on the trigger): %v`, err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return b, nil
}

// metaObject decodes a JSON object (leniently in a JSON string), numbers as json.Number; empty: nil.
func metaObject(md map[string]json.RawMessage, key string) (map[string]any, error) {
	raw, ok := md[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	if s, ok := jsonString(raw); ok {
		raw = json.RawMessage(s)
	}
	if string(bytes.Trim(raw, jsonSpace)) == "{}" { // the usual: no properties
		return nil, nil
	}
	if t := bytes.TrimLeft(raw, jsonSpace); len(t) == 0 || t[0] != '{' || !json.Valid(raw) {
		return nil, decodeErr("Metadata."+key, "want a JSON object, got %s", snippetJSON(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, decodeErr("Metadata."+key, "%v", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

func sessionLockedUntil(raw json.RawMessage) time.Time {
	var actions struct {
		SessionLockedUntil json.RawMessage `json:"SessionLockedUntil"`
	}
	if isNull(raw) || json.Unmarshal(raw, &actions) != nil {
		return time.Time{}
	}
	t, err := rawTime(actions.SessionLockedUntil, "Metadata.SessionActions.SessionLockedUntil")
	if err != nil {
		return time.Time{}
	}
	return t
}
