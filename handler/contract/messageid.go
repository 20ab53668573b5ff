package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// hashPrefix marks a derived MessageId whose original was replaced by its
// hash.
const hashPrefix = "sha256-"

// DeriveMessageID is the one rule by which every MessageId of this project
// is derived from another id (an order id, a MessageId) and a suffix: the
// producers' <order>:<sequence> and <order>:payment-timeout-<sequence>,
// and the handler's parked copies, replays, rescheduled retries and its own
// payment-timeout check. It returns original + suffix when that fits in
// MaxServiceBusIDLength characters as Service Bus counts them
// (ServiceBusLength); otherwise "sha256-<64 hex digits of original>" +
// suffix, which fits for any suffix of up to 57 characters (every suffix of
// this project); a longer suffix is hashed into the id with the original.
//
// The result is deterministic, so a message sent twice (a producer's
// retry, a lost answer, the handler's timeout check and the producer's)
// keeps its MessageId and duplicate detection drops the copy; distinct
// originals give distinct ids (up to SHA-256 collisions).
func DeriveMessageID(original, suffix string) string {
	if ServiceBusLength(original)+ServiceBusLength(suffix) <= MaxServiceBusIDLength {
		return original + suffix
	}
	sum := sha256.Sum256([]byte(original))
	id := hashPrefix + hex.EncodeToString(sum[:])
	if len(id)+ServiceBusLength(suffix) > MaxServiceBusIDLength {
		s := sha256.Sum256([]byte(original + suffix))
		return hashPrefix + hex.EncodeToString(s[:])
	}
	return id + suffix
}

// HashedMessageID reports whether id was derived from a hash of its
// original (DeriveMessageID): the original is then carried elsewhere (the
// body's orderId, an OriginalMessageId application property).
func HashedMessageID(id string) bool { return strings.HasPrefix(id, hashPrefix) }
