package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// handlerProc is bin/handler started as the Functions host starts it.
type handlerProc struct {
	cmd    *exec.Cmd
	base   string
	exited chan struct{} // closed once the process has been waited for
}

// startHandler execs bin/handler on a free port with its store at cs and
// returns once GET / answers 200, with the time that took.
func (b *runner) startHandler(ctx context.Context, cs, table string) (*handlerProc, time.Duration, error) {
	port, err := freeport.Pick()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(b.deployed)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"FUNCTIONS_CUSTOMHANDLER_PORT=" + strconv.Itoa(port),
		"OrderStore__connectionString=" + cs,
		"OrderStore__tableName=" + table,
		"LOG_LEVEL=" + b.opts.LogLevel,
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	p := &handlerProc{cmd: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("bench: start %s: %w", b.deployed, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	for {
		resp, err := client.Get(p.base + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(start), nil
			}
		}
		select {
		case <-p.exited:
			return nil, 0, fmt.Errorf("bench: %s exited before answering: %s", b.deployed, stderr.String())
		case <-ctx.Done():
			p.stop()
			return nil, 0, ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
		if time.Since(start) > 30*time.Second {
			p.stop()
			return nil, 0, fmt.Errorf("bench: %s did not answer GET / within 30 s", b.deployed)
		}
	}
}

func (p *handlerProc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits for the exit (SIGKILL after 10 s).
func (p *handlerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// postOrders sends n distinct orders' first messages straight to the
// handler's OrderStatus function, concurrency at a time; each must be Applied.
func postOrders(ctx context.Context, base, prefix string, n, concurrency int) error {
	tr := &http.Transport{MaxIdleConnsPerHost: concurrency}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	defer tr.CloseIdleConnections()
	next, errs := make(chan int), make(chan error, concurrency)
	for range concurrency {
		go func() {
			var err error
			for i := range next {
				if err == nil {
					err = postOne(ctx, client, base, fmt.Sprintf("%s-o%d", prefix, i))
				}
			}
			errs <- err
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var err error
	for range concurrency {
		err = cmp.Or(err, <-errs)
	}
	return err
}

func postOne(ctx context.Context, client *http.Client, base, id string) error {
	body := fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":1}`, id, order.Created)
	now := time.Now().UTC()
	inv, err := hostenc.EncodeServiceBus(hostproto.ServiceBusMessage{
		Body: []byte(body), MessageID: id + ":1", SessionID: id, Subject: order.SubjectStatusChanged,
		ContentType: "application/json", DeliveryCount: 1, SequenceNumber: 1, EnqueuedTime: now,
		ExpiresAt: now.Add(24 * time.Hour), SessionLockedUntil: now.Add(time.Minute),
	}, "message", "OrderStatus", now)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/OrderStatus", bytes.NewReader(inv))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("bench: post %s: %w", id, err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(buf.Bytes(), []byte(`"Applied"`)) {
		return fmt.Errorf("bench: post %s: %d %s", id, resp.StatusCode, buf.String())
	}
	return nil
}

func httpStatus(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
