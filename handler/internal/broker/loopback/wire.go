// Package loopback carries the broker port over HTTP on 127.0.0.1, so the
// handler runs against the development host's broker through the port, in
// another process: NewServer serves a broker.Broker under /broker/, Client
// calls it. The protocol is JSON over POST, one endpoint per port method plus
// now (the broker's clock); bodies travel as base64, properties with their
// type. An error is a non-2xx {"error":{"code":...,"message":...}}, the code
// naming the port's sentinel so errors.Is works on the client.
package loopback

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
)

type wireSource struct {
	Queue      string `json:"queue"`
	DeadLetter bool   `json:"deadLetter,omitempty"`
}

// wireValue is an application property value with its type: "string",
// "bool", "int64", "float64" or "time" (RFC 3339 nano).
type wireValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type wireMessage struct {
	MessageID             string               `json:"messageId,omitempty"`
	SessionID             string               `json:"sessionId,omitempty"`
	Subject               string               `json:"subject,omitempty"`
	ContentType           string               `json:"contentType,omitempty"`
	CorrelationID         string               `json:"correlationId,omitempty"`
	Body                  []byte               `json:"body,omitempty"`
	ApplicationProperties map[string]wireValue `json:"applicationProperties,omitempty"`
	TimeToLive            string               `json:"timeToLive,omitempty"`
}

type wireReceived struct {
	Message                    wireMessage `json:"message"`
	SequenceNumber             int64       `json:"sequenceNumber"`
	DeliveryCount              int32       `json:"deliveryCount"`
	EnqueuedTime               time.Time   `json:"enqueuedTime"`
	ExpiresAt                  time.Time   `json:"expiresAt"`
	DeadLetterReason           string      `json:"deadLetterReason,omitempty"`
	DeadLetterErrorDescription string      `json:"deadLetterErrorDescription,omitempty"`
	DeadLetterSource           string      `json:"deadLetterSource,omitempty"`
	LockToken                  string      `json:"lockToken,omitempty"`
	Scheduled                  bool        `json:"scheduled,omitempty"`
	Deferred                   bool        `json:"deferred,omitempty"`
}

type nowResponse struct {
	Now time.Time `json:"now"`
}

type sendRequest struct {
	Queue   string      `json:"queue"`
	Message wireMessage `json:"message"`
}

type scheduleRequest struct {
	sendRequest
	At time.Time `json:"at"`
}

type scheduleResponse struct {
	SequenceNumber int64 `json:"sequenceNumber"`
}

type cancelRequest struct {
	Queue          string `json:"queue"`
	SequenceNumber int64  `json:"sequenceNumber"`
}

type receiveRequest struct {
	Source wireSource `json:"source"`
	Max    int        `json:"max"`
	Wait   string     `json:"wait"`
}

type peekRequest struct {
	Source wireSource `json:"source"`
	Max    int        `json:"max"`
	From   int64      `json:"from"`
}

type messagesResponse struct {
	Messages []wireReceived `json:"messages"`
}

type settleRequest struct {
	Source         wireSource `json:"source"`
	LockToken      string     `json:"lockToken"`
	SequenceNumber int64      `json:"sequenceNumber"`
}

type errorResponse struct {
	Error wireError `json:"error"`
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes on the wire, one per sentinel of the port.
const (
	codeLockLost  = "lock_lost"
	codeNotFound  = "not_found"
	codeTransient = "transient"
	codeInvalid   = "invalid"
	codeInternal  = "internal"
)

var sentinels = map[string]error{
	codeLockLost:  broker.ErrLockLost,
	codeNotFound:  broker.ErrNotFound,
	codeTransient: broker.ErrTransient,
	codeInvalid:   broker.ErrInvalid,
}

func encodeValue(v any) wireValue {
	switch x := msgutil.Value(v).(type) {
	case string:
		return wireValue{"string", x}
	case bool:
		return wireValue{"bool", strconv.FormatBool(x)}
	case int64:
		return wireValue{"int64", strconv.FormatInt(x, 10)}
	case float64:
		return wireValue{"float64", strconv.FormatFloat(x, 'g', -1, 64)}
	case time.Time:
		return wireValue{"time", x.Format(time.RFC3339Nano)}
	default: // msgutil.Value leaves no other type
		return wireValue{"string", fmt.Sprint(x)}
	}
}

var errBadValue = errors.New("bad application property")

func decodeValue(w wireValue) (any, error) {
	var (
		v   any
		err error
	)
	switch w.Type {
	case "string":
		v = w.Value
	case "bool":
		v, err = strconv.ParseBool(w.Value)
	case "int64":
		v, err = strconv.ParseInt(w.Value, 10, 64)
	case "float64":
		v, err = strconv.ParseFloat(w.Value, 64)
	case "time":
		v, err = time.Parse(time.RFC3339Nano, w.Value)
	default:
		return nil, fmt.Errorf("%w: unknown type %q", errBadValue, w.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %v", errBadValue, w.Type, w.Value, err)
	}
	return v, nil
}

func encodeMessage(m broker.Message) wireMessage {
	w := wireMessage{
		MessageID:     m.MessageID,
		SessionID:     m.SessionID,
		Subject:       m.Subject,
		ContentType:   m.ContentType,
		CorrelationID: m.CorrelationID,
		Body:          m.Body,
	}
	if m.TimeToLive != 0 {
		w.TimeToLive = m.TimeToLive.String()
	}
	if len(m.ApplicationProperties) > 0 {
		w.ApplicationProperties = make(map[string]wireValue, len(m.ApplicationProperties))
		for k, v := range m.ApplicationProperties {
			w.ApplicationProperties[k] = encodeValue(v)
		}
	}
	return w
}

func decodeMessage(w wireMessage) (broker.Message, error) {
	m := broker.Message{
		MessageID:     w.MessageID,
		SessionID:     w.SessionID,
		Subject:       w.Subject,
		ContentType:   w.ContentType,
		CorrelationID: w.CorrelationID,
		Body:          w.Body,
	}
	if w.TimeToLive != "" {
		d, err := time.ParseDuration(w.TimeToLive)
		if err != nil {
			return m, fmt.Errorf("timeToLive %q: %w", w.TimeToLive, err)
		}
		m.TimeToLive = d
	}
	if len(w.ApplicationProperties) > 0 {
		m.ApplicationProperties = make(map[string]any, len(w.ApplicationProperties))
		for k, wv := range w.ApplicationProperties {
			v, err := decodeValue(wv)
			if err != nil {
				return m, fmt.Errorf("property %q: %w", k, err)
			}
			m.ApplicationProperties[k] = v
		}
	}
	return m, nil
}

func encodeReceived(r broker.Received) wireReceived {
	return wireReceived{
		Message:                    encodeMessage(r.Message),
		SequenceNumber:             r.SequenceNumber,
		DeliveryCount:              r.DeliveryCount,
		EnqueuedTime:               r.EnqueuedTime,
		ExpiresAt:                  r.ExpiresAt,
		DeadLetterReason:           r.DeadLetterReason,
		DeadLetterErrorDescription: r.DeadLetterErrorDescription,
		DeadLetterSource:           r.DeadLetterSource,
		LockToken:                  r.LockToken,
		Scheduled:                  r.Scheduled,
		Deferred:                   r.Deferred,
	}
}

func decodeReceived(w wireReceived) (broker.Received, error) {
	m, err := decodeMessage(w.Message)
	if err != nil {
		return broker.Received{}, err
	}
	return broker.Received{
		Message:                    m,
		SequenceNumber:             w.SequenceNumber,
		DeliveryCount:              w.DeliveryCount,
		EnqueuedTime:               w.EnqueuedTime,
		ExpiresAt:                  w.ExpiresAt,
		DeadLetterReason:           w.DeadLetterReason,
		DeadLetterErrorDescription: w.DeadLetterErrorDescription,
		DeadLetterSource:           w.DeadLetterSource,
		LockToken:                  w.LockToken,
		Scheduled:                  w.Scheduled,
		Deferred:                   w.Deferred,
	}, nil
}
