package orderstate

import (
	"container/list"
	"sync"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// cached is what the cache remembers of one order: the version last seen
// and its state. Only State.LastSequence (a lower bound, since it never
// decreases) and ETag (a guess at the current version, checked by the
// store) are trusted.
type cached struct {
	ETag  store.ETag
	State order.State
	// Lock is the session lock the entry was written or read under (the
	// zero Lock when unknown).
	Lock Lock
	// Unsure marks an order whose last write failed with an unknown
	// effect: nothing above is known, and the next call must read first.
	Unsure bool
}

// lru is a bounded least-recently-used map from order id to cached. It is
// safe for concurrent use. A nil *lru caches nothing.
type lru struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; values are *lruItem
	items map[string]*list.Element
}

type lruItem struct {
	key string
	val cached
}

func newLRU(max int) *lru {
	if max <= 0 {
		return nil
	}
	return &lru{max: max, order: list.New(), items: make(map[string]*list.Element, min(max, 1024))}
}

func (c *lru) get(key string) (cached, bool) {
	if c == nil {
		return cached{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return cached{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruItem).val, true
}

// put records val for key, evicting the least recently used entry when
// full. An entry with a higher LastSequence than val is kept: it is the
// better lower bound, and val is then an older version.
func (c *lru) put(key string, val cached) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		it := el.Value.(*lruItem)
		if it.val.State.LastSequence <= val.State.LastSequence {
			it.val = val
		}
		c.order.MoveToFront(el)
		return
	}
	c.addLocked(key, val)
}

// addLocked adds an entry for a key not cached, evicting the least
// recently used one when full. c.mu is held.
func (c *lru) addLocked(key string, val cached) {
	c.items[key] = c.order.PushFront(&lruItem{key: key, val: val})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruItem).key)
	}
}

// markUnsure replaces what is cached of key, if anything, with an Unsure
// entry, so that the next call reads before it writes (a dropped entry
// would let a sequence-1 update insert at once, costing a 409 and a read
// when the lost write took effect).
func (c *lru) markUnsure(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruItem).val = cached{Unsure: true}
		c.order.MoveToFront(el)
		return
	}
	c.addLocked(key, cached{Unsure: true})
}

func (c *lru) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

func (c *lru) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
