package orderstate

import (
	"container/list"
	"sync"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// cached is an order's cache entry: only its LastSequence (a lower bound) and ETag are trusted.
type cached struct {
	ETag  store.ETag
	State order.State
	// Lock is the session lock the entry was written or read under.
	Lock Lock
	// Unsure: the last write's effect is unknown; read before anything else.
	Unsure bool
}

// lru is a bounded, concurrency-safe LRU map; a nil *lru caches nothing.
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

// put records val for key, unless its entry has a higher LastSequence; full, it evicts the LRU.
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

// addLocked adds an uncached key, evicting when full; c.mu is held.
func (c *lru) addLocked(key string, val cached) {
	c.items[key] = c.order.PushFront(&lruItem{key: key, val: val})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruItem).key)
	}
}

// markUnsure makes key's entry Unsure: the next call reads before it writes.
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
