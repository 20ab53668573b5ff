package hostproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// ServiceBusMessage is a Service Bus trigger's message as the host hands it
// to a custom handler. Empty strings stand for values the host left out
// (null). Times are in UTC; the host sends them to the second.
type ServiceBusMessage struct {
	Body []byte

	MessageID, SessionID, Subject, ContentType, CorrelationID, LockToken, ReplyTo, ReplyToSessionID, To, PartitionKey, DeadLetterSource string

	DeliveryCount  int32
	SequenceNumber int64

	EnqueuedTime, ExpiresAt time.Time

	// ApplicationProperties holds the message's properties as JSON decodes
	// them (numbers are json.Number); nil when there are none.
	ApplicationProperties map[string]any

	// SessionLockedUntil is when the session lock expires, as the host saw
	// it at dispatch (the host renews it); zero when unknown. It is read
	// from the host's SessionActions object on a best-effort basis: a
	// missing or malformed one leaves it zero and is no error.
	SessionLockedUntil time.Time
}

// DecodeServiceBus decodes an invocation of a Service Bus trigger whose
// binding is named binding and declared with "dataType": "binary".
//
// Data.<binding> must be the body as one standard, padded base64 string.
// Metadata keys are read as the package comment describes; where the host
// sends a key and its older alias, the first one present wins:
// EnqueuedTimeUtc over EnqueuedTime, ExpiresAtUtc over ExpiresAt, Subject
// over Label, ApplicationProperties over UserProperties. Missing and null
// keys give zero values. Errors are *DecodeError naming the key.
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

// firstPresent returns the first of keys that md holds with a non-null
// value, or the first key when none does.
func firstPresent(md map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		if raw, ok := md[k]; ok && !isNull(raw) {
			return k
		}
	}
	return keys[0]
}

// dataBytes decodes Data.<binding> as a standard, padded base64 string
// with zero padding bits (line breaks are skipped, as encoding/base64
// does). An empty string is an empty (nil) body.
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

// metaObject decodes a dictionary value: a JSON object, or leniently a JSON
// string holding one. Numbers become json.Number. Absent, null and empty
// give nil.
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

// sessionLockedUntil reads SessionActions.SessionLockedUntil, or zero.
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

// serviceBusMetadata is Metadata as the host sends it for one message of a
// session-enabled Service Bus trigger, in the extension's order. String
// fields hold their value's JSON encoding; omitempty leaves out the nulls.
type serviceBusMetadata struct {
	SessionActions        *sessionActions `json:"SessionActions,omitempty"`
	DeliveryCount         string          `json:"DeliveryCount"`
	DeadLetterSource      string          `json:"DeadLetterSource,omitempty"`
	LockToken             string          `json:"LockToken,omitempty"`
	ExpiresAtUtc          string          `json:"ExpiresAtUtc"`
	ExpiresAt             string          `json:"ExpiresAt"`
	EnqueuedTimeUtc       string          `json:"EnqueuedTimeUtc"`
	EnqueuedTime          string          `json:"EnqueuedTime"`
	MessageID             string          `json:"MessageId,omitempty"`
	ContentType           string          `json:"ContentType,omitempty"`
	ReplyTo               string          `json:"ReplyTo,omitempty"`
	SequenceNumber        string          `json:"SequenceNumber"`
	To                    string          `json:"To,omitempty"`
	Subject               string          `json:"Subject,omitempty"`
	Label                 string          `json:"Label,omitempty"`
	CorrelationID         string          `json:"CorrelationId,omitempty"`
	ApplicationProperties json.RawMessage `json:"ApplicationProperties"`
	UserProperties        json.RawMessage `json:"UserProperties"`
	SessionID             string          `json:"SessionId,omitempty"`
	ReplyToSessionID      string          `json:"ReplyToSessionId,omitempty"`
	PartitionKey          string          `json:"PartitionKey,omitempty"`
	Sys                   sysData         `json:"sys"`
}

type sessionActions struct {
	SessionLockedUntil string `json:"SessionLockedUntil"`
}

// EncodeServiceBus encodes m as the host invokes functionName at time now
// for a trigger whose binding is named binding and declared with
// "dataType": "binary". It is for the development host; its output is what
// DecodeServiceBus reads back (times cut to whole seconds, as the host
// sends them).
//
// The shape follows the Service Bus extension: Data.<binding> is the body
// in base64; Metadata holds DeliveryCount and SequenceNumber, the string
// properties that are non-empty (empty stands for null, which the host
// leaves out), Subject under both Subject and its old alias Label,
// ApplicationProperties under both ApplicationProperties and UserProperties
// ({} when nil), the enqueued and expiry times under both the ...Utc
// (DateTime, no zone) and the DateTimeOffset keys, SessionActions
// {SessionLockedUntil} for a session message (or any message with a
// SessionLockedUntil), and sys {MethodName, UtcNow,
// RandGuid}. The host's other action and client objects are left out:
// handlers cannot use them.
//
// It fails when binding or functionName is empty, a time lies outside the
// years 1 to 9999, or ApplicationProperties does not encode as JSON.
func EncodeServiceBus(m ServiceBusMessage, binding, functionName string, now time.Time) ([]byte, error) {
	if binding == "" {
		return nil, errors.New("hostproto: binding name is empty")
	}
	md := serviceBusMetadata{
		DeliveryCount:    strconv.FormatInt(int64(m.DeliveryCount), 10),
		SequenceNumber:   strconv.FormatInt(m.SequenceNumber, 10),
		DeadLetterSource: quoteNonEmpty(m.DeadLetterSource),
		LockToken:        quoteNonEmpty(m.LockToken),
		MessageID:        quoteNonEmpty(m.MessageID),
		ContentType:      quoteNonEmpty(m.ContentType),
		ReplyTo:          quoteNonEmpty(m.ReplyTo),
		To:               quoteNonEmpty(m.To),
		Subject:          quoteNonEmpty(m.Subject),
		Label:            quoteNonEmpty(m.Subject),
		CorrelationID:    quoteNonEmpty(m.CorrelationID),
		SessionID:        quoteNonEmpty(m.SessionID),
		ReplyToSessionID: quoteNonEmpty(m.ReplyToSessionID),
		PartitionKey:     quoteNonEmpty(m.PartitionKey),
	}
	var err error
	for _, f := range []struct {
		dst    *string
		key    string
		t      time.Time
		layout string
	}{
		{&md.ExpiresAtUtc, "ExpiresAtUtc", m.ExpiresAt, formatUTCNoZone},
		{&md.ExpiresAt, "ExpiresAt", m.ExpiresAt, formatOffset},
		{&md.EnqueuedTimeUtc, "EnqueuedTimeUtc", m.EnqueuedTime, formatUTCNoZone},
		{&md.EnqueuedTime, "EnqueuedTime", m.EnqueuedTime, formatOffset},
	} {
		if *f.dst, err = formatTime(f.key, f.t, f.layout); err != nil {
			return nil, err
		}
	}
	props := m.ApplicationProperties
	if props == nil {
		props = map[string]any{}
	}
	if md.ApplicationProperties, err = marshal(props); err != nil {
		return nil, errors.New("hostproto: ApplicationProperties: " + err.Error())
	}
	md.UserProperties = md.ApplicationProperties
	if m.SessionID != "" || !m.SessionLockedUntil.IsZero() {
		until, err := formatTime("SessionActions.SessionLockedUntil", m.SessionLockedUntil, formatNetOffset)
		if err != nil {
			return nil, err
		}
		md.SessionActions = &sessionActions{SessionLockedUntil: until}
	}
	if md.Sys, err = newSys(functionName, now, m.MessageID, md.SequenceNumber, md.DeliveryCount); err != nil {
		return nil, err
	}
	return marshal(struct {
		Data     map[string]string  `json:"Data"`
		Metadata serviceBusMetadata `json:"Metadata"`
	}{
		Data:     map[string]string{binding: base64.StdEncoding.EncodeToString(m.Body)},
		Metadata: md,
	})
}

// quoteNonEmpty returns the host's encoding of a non-empty string value,
// and "" (left out) for an empty one.
func quoteNonEmpty(s string) string {
	if s == "" {
		return ""
	}
	return quoteJSON(s)
}
