package hostenc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

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
// for a trigger binding named binding with "dataType": "binary", as
// hostproto.DecodeServiceBus reads it back (times to the second). As in the
// Service Bus extension: Data.<binding> is the body in base64; Metadata holds
// the non-empty string properties (empty is the host's null, left out),
// Subject also as Label, ApplicationProperties also as UserProperties ({}
// when nil), the times under both the ...Utc and the DateTimeOffset keys,
// SessionActions for a session message and sys; the host's action and
// client objects, which handlers cannot use, are left out. It fails on an
// empty binding or functionName, a time outside the years 1 to 9999, or
// ApplicationProperties that do not encode as JSON.
func EncodeServiceBus(m hostproto.ServiceBusMessage, binding, functionName string, now time.Time) ([]byte, error) {
	if binding == "" {
		return nil, errors.New("hostenc: binding name is empty")
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
		return nil, errors.New("hostenc: ApplicationProperties: " + err.Error())
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
