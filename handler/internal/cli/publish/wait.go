package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
)

// Defaults of status --wait and of wait.
const (
	defaultWaitTimeout = 30 * time.Second
	maxWaitTimeout     = time.Hour
	waitPoll           = 100 * time.Millisecond
	waitParallel       = 8 // orders polled at once with --from
	orderIDPlaceholder = "{orderId}"
)

// getOrderURL resolves --wait's GetOrder URL template: --get-order-url, else
// the development host's front; an error names what to pass.
func getOrderURL(flagValue, devHostAddr string) (string, error) {
	if flagValue != "" {
		return flagValue, checkGetOrderURL(flagValue)
	}
	if devHostAddr != "" {
		return "http://" + devHostAddr + "/api/orders/" + orderIDPlaceholder, nil
	}
	return "", errors.New("--wait needs --get-order-url against Azure (https://<app>.azurewebsites.net/api/orders/{orderId}?code=<function key>), or a running development host with an HTTP front")
}

// checkWaitTimeout reports why d (--name) is not in (0, maxWaitTimeout].
func checkWaitTimeout(name string, d time.Duration) error {
	if d <= 0 || d > maxWaitTimeout {
		return fmt.Errorf("--%s %s: want a duration above 0 and at most 1h", name, d)
	}
	return nil
}

// newWaiter polls the GetOrder URL template tmpl for at most timeout.
func newWaiter(tmpl string, timeout time.Duration) *waiter {
	return &waiter{client: &http.Client{Timeout: 10 * time.Second}, tmpl: tmpl, timeout: timeout}
}

// checkGetOrderURL reports why u is not a GetOrder URL template.
func checkGetOrderURL(u string) error {
	if !strings.Contains(u, orderIDPlaceholder) {
		return fmt.Errorf("--get-order-url %q: want a URL with %s where the order id goes", u, orderIDPlaceholder)
	}
	p, err := url.Parse(strings.ReplaceAll(u, orderIDPlaceholder, "o-1"))
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("--get-order-url %q: want an http or https URL", u)
	}
	return nil
}

// orderAnswer is what GetOrder last said about one order.
type orderAnswer struct {
	code         int
	status       string
	lastSequence int64
	err          string // the request failed (no answer)
}

func (a orderAnswer) String() string {
	switch {
	case a.err != "":
		return "no answer: " + a.err
	case a.code == 0:
		return "nothing yet (no request finished in time)"
	case a.code == http.StatusOK:
		return fmt.Sprintf("%s at sequence %d", a.status, a.lastSequence)
	case a.code == http.StatusNotFound:
		return "not found"
	default:
		return fmt.Sprintf("HTTP %d", a.code)
	}
}

// waiter polls GetOrder until orders reach the sequence sent.
type waiter struct {
	client  *http.Client
	tmpl    string // URL with {orderId}
	timeout time.Duration
}

// until polls GetOrder for ids until reached holds or w.timeout passes.
func (w *waiter) until(ctx context.Context, ids []string, reached func(id string, a orderAnswer) bool) (behind map[string]orderAnswer, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	last := map[string]orderAnswer{}
	pending := ids
	for {
		answers := make([]orderAnswer, len(pending))
		sem := make(chan struct{}, waitParallel)
		var wg sync.WaitGroup
		for i, id := range pending {
			wg.Go(func() {
				sem <- struct{}{}
				answers[i] = w.get(ctx, id)
				<-sem
			})
		}
		wg.Wait()
		var still []string
		for i, id := range pending {
			a := answers[i]
			if a.err != "" && ctx.Err() != nil {
				a = last[id] // the request was cut by our own deadline
			}
			last[id] = a
			if !reached(id, a) {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			behind = map[string]orderAnswer{}
			for _, id := range pending {
				behind[id] = last[id]
			}
			return behind, ctx.Err()
		case <-time.After(waitPoll):
		}
	}
}

func (w *waiter) get(ctx context.Context, orderID string) orderAnswer {
	u := strings.ReplaceAll(w.tmpl, orderIDPlaceholder, url.PathEscape(orderID))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return orderAnswer{err: err.Error()}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return orderAnswer{err: err.Error()}
	}
	defer resp.Body.Close()
	a := orderAnswer{code: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		var v struct {
			Status       string `json:"status"`
			LastSequence int64  `json:"lastSequence"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
			return orderAnswer{code: resp.StatusCode, err: "not an order: " + err.Error()}
		}
		a.status, a.lastSequence = v.Status, v.LastSequence
	}
	return a
}

// waitAndReport waits after a send and reports (exit 0 or 1).
func waitAndReport(ctx context.Context, c *command, w *waiter, changes []contract.StatusChanged) int {
	var ids []string // in first-seen order, each with its highest sequence sent
	want := map[string]int64{}
	for _, c := range changes {
		if _, ok := want[c.OrderID]; !ok {
			ids = append(ids, c.OrderID)
		}
		want[c.OrderID] = max(want[c.OrderID], c.Sequence)
	}
	behind, err := w.until(ctx, ids, func(id string, a orderAnswer) bool {
		return a.code == http.StatusOK && a.lastSequence >= want[id]
	})
	if len(behind) == 0 && err == nil {
		if len(ids) == 1 {
			fmt.Fprintf(c.stdout, "applied: order %s shows sequence %d or later (GetOrder)\n", ids[0], want[ids[0]])
		} else {
			fmt.Fprintf(c.stdout, "applied: all %d orders show the sequence sent or later (GetOrder)\n", len(ids))
		}
		return ExitOK
	}
	var late []string
	for _, id := range ids {
		if a, ok := behind[id]; ok {
			late = append(late, fmt.Sprintf("%s (want sequence %d, GetOrder says %s)", id, want[id], a))
		}
	}
	slices.Sort(late)
	const show = 5
	more := ""
	if len(late) > show {
		more = fmt.Sprintf(" and %d more", len(late)-show)
		late = late[:show]
	}
	why := fmt.Sprintf("not applied within --wait-timeout %s", w.timeout)
	if ctx.Err() != nil {
		why = "interrupted before it was applied"
	}
	fmt.Fprintf(c.stderr, "%s: sent, but %s: %s%s; it may be queued still, or parked (orderstatus deadletters list --source poison)\n",
		c.name, why, strings.Join(late, ", "), more)
	return ExitFailure
}
