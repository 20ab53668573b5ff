package loopback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
)

// Options tune NewClient. The zero value (or nil) is usable.
type Options struct {
	// BrokerTime keeps the broker's times (tests driving its clock).
	BrokerTime bool
}

// MaxIdleConns is how many idle connections a Client keeps; callTimeout
// bounds every call, on top of a receive's wait.
const (
	MaxIdleConns = 256
	callTimeout  = 30 * time.Second
)

// Client implements broker.Broker against a NewServer on 127.0.0.1. It is
// safe for concurrent use.
type Client struct {
	base    string
	http    *http.Client
	brokerT bool
}

var _ broker.Broker = (*Client)(nil)

// NewClient returns a client of the server at baseURL, on 127.0.0.1 only.
func NewClient(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("loopback: broker URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("loopback: broker URL %q: want http://127.0.0.1:<port>[/path]", baseURL)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Go's default of 2 idle connections per host churns ports in bursts.
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = MaxIdleConns, MaxIdleConns
	return &Client{base: strings.TrimSuffix(u.String(), "/"), http: &http.Client{Transport: tr}, brokerT: o.BrokerTime}, nil
}

// call posts req and decodes the answer into resp; errors wrap sentinels.
func (c *Client) call(ctx context.Context, op, key, endpoint string, extra time.Duration, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout+extra)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("loopback: %s %s: encode: %w", op, key, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/broker/"+endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("loopback: %s %s: %w", op, key, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if !c.brokerT {
		hreq.Header.Set(HeaderClientTime, time.Now().UTC().Format(time.RFC3339Nano))
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("loopback: %s %s: %w", op, key, err)
		}
		return fmt.Errorf("loopback: %s %s: %w: %w", op, key, broker.ErrTransient, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxRequestBytes*4))
	if err != nil {
		return fmt.Errorf("loopback: %s %s: read answer: %w: %w", op, key, broker.ErrTransient, err)
	}
	if hresp.StatusCode/100 != 2 {
		var e errorResponse
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("loopback: %s %s: HTTP %d: %.200s", op, key, hresp.StatusCode, data)
		}
		return fmt.Errorf("loopback: %s %s: %w", op, key, &remoteError{msg: e.Error.Message, sentinel: sentinels[e.Error.Code]})
	}
	if resp != nil {
		if err := json.Unmarshal(data, resp); err != nil {
			return fmt.Errorf("loopback: %s %s: decode answer: %w", op, key, err)
		}
	}
	return nil
}

// remoteError is the server's error message with its sentinel for errors.Is.
type remoteError struct {
	msg      string
	sentinel error // nil for codes without one
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// Send enqueues msg on queue.
func (c *Client) Send(ctx context.Context, queue string, msg broker.Message) error {
	return c.call(ctx, "send", queue+" message "+msg.MessageID, "send", 0,
		sendRequest{Queue: queue, Message: encodeMessage(msgutil.Message(msg))}, nil)
}

// Schedule enqueues msg, visible at at, and returns its sequence number.
func (c *Client) Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error) {
	var resp scheduleResponse
	err := c.call(ctx, "schedule", queue+" message "+msg.MessageID, "schedule", 0,
		scheduleRequest{sendRequest{Queue: queue, Message: encodeMessage(msgutil.Message(msg))}, at}, &resp)
	return resp.SequenceNumber, err
}

// CancelScheduled removes a scheduled message; ErrNotFound if there is none.
func (c *Client) CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error {
	return c.call(ctx, "cancel", fmt.Sprintf("%s seq %d", queue, sequenceNumber), "cancel", 0,
		cancelRequest{Queue: queue, SequenceNumber: sequenceNumber}, nil)
}

// Receive locks up to max messages of src, waiting up to wait (server time).
func (c *Client) Receive(ctx context.Context, src broker.Source, maxMessages int, wait time.Duration) ([]broker.Received, error) {
	var resp messagesResponse
	err := c.call(ctx, "receive", src.String(), "receive", max(wait, 0),
		receiveRequest{Source: wireSource(src), Max: maxMessages, Wait: wait.String()}, &resp)
	return decodeMessages("receive", src, resp, err)
}

// Peek returns up to max messages of src from sequence number from, unlocked.
func (c *Client) Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error) {
	var resp messagesResponse
	err := c.call(ctx, "peek", src.String(), "peek", 0,
		peekRequest{Source: wireSource(src), Max: max, From: from}, &resp)
	return decodeMessages("peek", src, resp, err)
}

// decodeMessages is the messages of resp, or err if the call failed.
func decodeMessages(op string, src broker.Source, resp messagesResponse, err error) ([]broker.Received, error) {
	if err != nil {
		return nil, err
	}
	out := make([]broker.Received, len(resp.Messages))
	for i, w := range resp.Messages {
		m, err := decodeReceived(w)
		if err != nil {
			return nil, fmt.Errorf("loopback: %s %s: decode message %d: %w", op, src, i, err)
		}
		out[i] = m
	}
	return out, nil
}

// Complete removes a received message. ErrLockLost if its lock expired.
func (c *Client) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	return c.call(ctx, "complete", fmt.Sprintf("%s seq %d", src, m.SequenceNumber), "complete", 0,
		settleRequest{Source: wireSource(src), LockToken: m.LockToken, SequenceNumber: m.SequenceNumber}, nil)
}

// Abandon releases a received message's lock.
func (c *Client) Abandon(ctx context.Context, src broker.Source, m broker.Received) error {
	return c.call(ctx, "abandon", fmt.Sprintf("%s seq %d", src, m.SequenceNumber), "abandon", 0,
		settleRequest{Source: wireSource(src), LockToken: m.LockToken, SequenceNumber: m.SequenceNumber}, nil)
}

// Close releases its idle connections.
func (c *Client) Close(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}
