package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// hashPrefix marks a derived MessageId whose original was replaced by its hash.
const hashPrefix = "sha256-"

// DeriveMessageID is the one rule deriving every MessageId of this project from
// another id and a suffix: original + suffix when it fits MaxServiceBusIDLength
// (ServiceBusLength), else "sha256-<64 hex of original>" + suffix, or the hash
// of both for a suffix over 57 characters. It is deterministic, so a resent
// message keeps its MessageId; distinct originals give distinct ids.
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

// HashedMessageID reports whether id was derived from a hash of its original
// (DeriveMessageID), which is then carried elsewhere (orderId, OriginalMessageId).
func HashedMessageID(id string) bool { return strings.HasPrefix(id, hashPrefix) }
