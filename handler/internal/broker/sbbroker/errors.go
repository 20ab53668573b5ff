package sbbroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// classify maps an SDK error onto the port's sentinels, keeping the SDK
// error in the chain: the only place that reads SDK errors.
//
//   - CodeLockLost: ErrLockLost.
//   - CodeNotFound, an AMQP not-found condition: ErrNotFound (no such
//     queue, no such scheduled message).
//   - CodeTimeout, CodeConnectionLost, CodeClosed, server-busy, a full
//     queue, and a deadline (ours or the caller's): ErrTransient.
//   - ErrMessageTooLarge, the AMQP conditions of a request the service
//     refuses (not-allowed: a message without SessionId for a session queue,
//     a receiver without session on one; invalid-field; size exceeded;
//     argument errors): ErrInvalid.
//   - CodeUnauthorizedAccess: ErrTransient, as a fresh role assignment takes
//     minutes to propagate; a lasting one ends, after the in-call retries
//     and the redeliveries, in the dead-letter queue and its alert;
//   - anything else: unchanged, not transient.
//
// The caller's cancellation stays context.Canceled, not transient.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if sentinel := sentinelOf(err); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

func sentinelOf(err error) error {
	for _, s := range []error{broker.ErrLockLost, broker.ErrNotFound, broker.ErrTransient, broker.ErrInvalid} {
		if errors.Is(err, s) {
			return nil // classified already
		}
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			return broker.ErrLockLost
		case azservicebus.CodeNotFound:
			return broker.ErrNotFound
		case azservicebus.CodeTimeout, azservicebus.CodeConnectionLost, azservicebus.CodeClosed:
			return broker.ErrTransient
		case azservicebus.CodeUnauthorizedAccess:
			return broker.ErrTransient
		}
	}
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return broker.ErrInvalid
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch amqpErr.Condition {
		case amqp.ErrCondNotFound, "com.microsoft:entity-not-found", "com.microsoft:message-not-found":
			return broker.ErrNotFound
		case amqp.ErrCondNotAllowed, amqp.ErrCondInvalidField, amqp.ErrCondMessageSizeExceeded,
			amqp.ErrCondDecodeError, "com.microsoft:argument-error", "com.microsoft:argument-out-of-range":
			return broker.ErrInvalid
		case "com.microsoft:server-busy", "com.microsoft:timeout",
			amqp.ErrCondResourceLimitExceeded: // the queue is full: it drains
			return broker.ErrTransient
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return broker.ErrTransient
	}
	return nil
}
