package sbbroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// classify maps an SDK error onto the port's sentinels, keeping it in the
// chain (the only place that reads SDK errors): CodeLockLost is ErrLockLost;
// CodeNotFound and AMQP not-found are ErrNotFound; CodeTimeout,
// CodeConnectionLost, CodeClosed, server-busy, a full queue, a deadline and
// CodeUnauthorizedAccess (a new role assignment takes minutes to propagate)
// are ErrTransient; ErrMessageTooLarge and a refused request's AMQP conditions
// (not-allowed, invalid-field, size exceeded, argument errors) are
// ErrInvalid. Anything else, the caller's cancellation too, is unchanged.
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
