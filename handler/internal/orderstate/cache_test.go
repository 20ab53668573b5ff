package orderstate

import (
	"fmt"
	"sync"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

func entry(seq int64, etag string) cached {
	return cached{ETag: store.ETag(etag), State: order.State{Status: order.Paid, LastSequence: seq}}
}

func TestLRU(t *testing.T) {
	tests := []struct {
		name string
		run  func(c *lru)
		key  string
		want *cached // nil: absent
	}{
		{"put then get", func(c *lru) { c.put("a", entry(1, "e1")) }, "a", &cached{ETag: "e1", State: entry(1, "").State}},
		{"newer replaces", func(c *lru) { c.put("a", entry(1, "e1")); c.put("a", entry(2, "e2")) }, "a", ptr(entry(2, "e2"))},
		{"same sequence replaces (expiry keeps the sequence)", func(c *lru) { c.put("a", entry(1, "e1")); c.put("a", entry(1, "e2")) }, "a", ptr(entry(1, "e2"))},
		{"older never lowers the bound", func(c *lru) { c.put("a", entry(5, "e5")); c.put("a", entry(3, "e3")) }, "a", ptr(entry(5, "e5"))},
		{"drop", func(c *lru) { c.put("a", entry(1, "e1")); c.drop("a") }, "a", nil},
		{"evicts the least recently used", func(c *lru) {
			c.put("a", entry(1, "a"))
			c.put("b", entry(1, "b"))
			c.get("a")
			c.put("c", entry(1, "c")) // evicts b
		}, "b", nil},
		{"keeps the recently used", func(c *lru) {
			c.put("a", entry(1, "a"))
			c.put("b", entry(1, "b"))
			c.get("a")
			c.put("c", entry(1, "c"))
		}, "a", ptr(entry(1, "a"))},
		{"update refreshes recency", func(c *lru) {
			c.put("a", entry(1, "a"))
			c.put("b", entry(1, "b"))
			c.put("a", entry(2, "a2"))
			c.put("c", entry(1, "c")) // evicts b
		}, "a", ptr(entry(2, "a2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newLRU(2)
			tt.run(c)
			got, ok := c.get(tt.key)
			switch {
			case tt.want == nil && ok:
				t.Errorf("get(%q) = %+v, want absent", tt.key, got)
			case tt.want != nil && (!ok || got != *tt.want):
				t.Errorf("get(%q) = %+v, %t; want %+v", tt.key, got, ok, *tt.want)
			}
			if n := c.len(); n > 2 {
				t.Errorf("len = %d, want at most 2", n)
			}
		})
	}
}

func ptr(c cached) *cached { return &c }

func TestLRUDisabled(t *testing.T) {
	c := newLRU(-1)
	c.put("a", entry(1, "e1"))
	if got, ok := c.get("a"); ok {
		t.Errorf("disabled cache returned %+v", got)
	}
	c.drop("a")
}

func TestLRUConcurrent(t *testing.T) {
	const size = 64
	c := newLRU(size)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				key := fmt.Sprint((g*1000 + i) % 100)
				c.put(key, entry(int64(i), key))
				c.get(key)
				if i%7 == 0 {
					c.drop(key)
				}
			}
		})
	}
	wg.Wait()
	if n := c.len(); n > size {
		t.Errorf("len = %d, want at most %d", n, size)
	}
}

// len is how many orders c holds.
func (c *lru) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
