// Package msgid derives Service Bus MessageIds from other MessageIds
// (replays, parked copies, rescheduled retries, the payment-timeout check)
// and keeps every one within Service Bus's limit of 128 characters, whatever
// the length of the id it is derived from. It is the handler's name for
// the one rule, contract.DeriveMessageID, which producers (package publish)
// follow too: a MessageId the handler derives and one a producer derives
// from the same order (the payment-timeout check) are the same.
//
// A derived id is deterministic: the same original and suffix give the same
// id, so a copy sent twice (a lost answer, a crash between send and record)
// is dropped by duplicate detection. Distinct originals give distinct ids
// (up to SHA-256 collisions).
package msgid

import "github.com/orderstatus/orderstatus/handler/contract"

// MaxLength is Service Bus's limit on a MessageId and a SessionId
// (characters). Source: "Service Bus quotas", learn.microsoft.com
// (azure/service-bus-messaging/service-bus-quotas: "Maximum size of
// MessageId, SessionId: 128").
const MaxLength = contract.MaxServiceBusIDLength

// Derive returns original + suffix when that fits in MaxLength characters
// (contract.ServiceBusLength); otherwise "sha256-<64 hex digits of
// original>" + suffix. suffix must be at most MaxLength-71 characters (57),
// which every suffix of this project is; a longer suffix is itself hashed
// into the id so the result still fits. See contract.DeriveMessageID.
func Derive(original, suffix string) string { return contract.DeriveMessageID(original, suffix) }

// Hashed reports whether id was derived from a hash of its original (the
// original is then carried elsewhere, e.g. in an OriginalMessageId
// application property).
func Hashed(id string) bool { return contract.HashedMessageID(id) }
