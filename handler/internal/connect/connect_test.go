package connect_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
)

// fakeCred is never asked for a token: nothing here contacts Azure.
type fakeCred struct{}

func (fakeCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("fakeCred: no tokens in tests")
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestNamespace(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "sb-orders", want: "sb-orders.servicebus.windows.net"},
		{in: "sb-orders.servicebus.windows.net", want: "sb-orders.servicebus.windows.net"},
		{in: "sb://sb-orders.servicebus.windows.net/", want: "sb-orders.servicebus.windows.net"},
		{in: "https://sb-orders.servicebus.windows.net", want: "sb-orders.servicebus.windows.net"},
		{in: "", bad: true},
		{in: "sb orders", bad: true},
		{in: "-sb.servicebus.windows.net", bad: true},
		{in: "sb..windows.net", bad: true},
		{in: "http://sb-orders.servicebus.windows.net", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := connect.Namespace(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("Namespace(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Namespace(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestServiceBusOrder(t *testing.T) {
	dir := t.TempDir() // no development host here
	t.Run("flag beats the setting", func(t *testing.T) {
		tg, err := connect.ServiceBus(connect.Options{Namespace: "flag-ns", Dir: dir, Credential: fakeCred{},
			Getenv: env(map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "env-ns.servicebus.windows.net"})})
		if err != nil {
			t.Fatal(err)
		}
		defer tg.Broker.Close(context.Background())
		if !strings.Contains(tg.Describe, "flag-ns.servicebus.windows.net") || tg.DevHost != nil {
			t.Errorf("Describe = %q, DevHost = %v; want the flag's namespace", tg.Describe, tg.DevHost)
		}
		if tg.Queue != "order-status" || tg.PoisonQueue != "order-status-poison" {
			t.Errorf("queues %q, %q; want the defaults", tg.Queue, tg.PoisonQueue)
		}
	})
	t.Run("setting", func(t *testing.T) {
		tg, err := connect.ServiceBus(connect.Options{Dir: dir, Credential: fakeCred{},
			Getenv: env(map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "env-ns.servicebus.windows.net", "POISON_QUEUE": "p2"})})
		if err != nil {
			t.Fatal(err)
		}
		defer tg.Broker.Close(context.Background())
		if !strings.Contains(tg.Describe, "env-ns.servicebus.windows.net") || tg.PoisonQueue != "p2" {
			t.Errorf("Describe = %q, poison queue %q", tg.Describe, tg.PoisonQueue)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		_, err := connect.ServiceBus(connect.Options{Namespace: "not a namespace", Dir: dir, Getenv: env(nil)})
		if err == nil || !strings.Contains(err.Error(), "--namespace") {
			t.Errorf("err = %v, want one naming --namespace", err)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		_, err := connect.ServiceBus(connect.Options{Dir: dir, Getenv: env(nil)})
		if !errors.Is(err, connect.ErrNoTarget) || strings.Count(err.Error(), "make run") != 1 {
			t.Errorf("err = %v, want ErrNoTarget saying once to start make run", err)
		}
	})
}

// TestDevHost: with nothing set, the running development host is used, and
// the broker it names really is reached.
func TestDevHost(t *testing.T) {
	mb := membroker.New(nil)
	if err := mb.CreateQueue("dev-q", membroker.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	defer srv.Close()
	root := t.TempDir()
	remove, err := devrun.Write(root, devrun.Endpoints{
		PID: os.Getpid(), BrokerURL: srv.URL, Queue: "dev-q", PoisonQueue: "dev-p",
		StoreConnectionString: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:1/devstoreaccount1;",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	tg, err := connect.ServiceBus(connect.Options{Dir: root, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Broker.Close(context.Background())
	if tg.DevHost == nil || tg.Queue != "dev-q" || tg.PoisonQueue != "dev-p" || !strings.Contains(tg.Describe, "make run") {
		t.Fatalf("target %+v: want the development host and its queues", tg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tg.Broker.Peek(ctx, broker.Source{Queue: "dev-q"}, 1, 0); err != nil {
		t.Fatalf("peek through the development host: %v", err)
	}
	_, desc, err := tg.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(desc, "http://127.0.0.1:1/devstoreaccount1") || strings.Contains(desc, "a2V5") {
		t.Errorf("Tables description %q: want the endpoint and no key", desc)
	}
}

func TestTablesOrder(t *testing.T) {
	dir := t.TempDir()
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:2/devstoreaccount1;"
	tests := []struct {
		name     string
		tables   string
		env      map[string]string
		want     string
		wantFail string
	}{
		{name: "flag URL", tables: "https://acct.table.core.windows.net", env: map[string]string{"OrderStore__serviceUri": "https://other.table.core.windows.net"}, want: "https://acct.table.core.windows.net"},
		{name: "flag connection string", tables: cs, want: "http://127.0.0.1:2/devstoreaccount1"},
		{name: "service URI setting", env: map[string]string{"OrderStore__serviceUri": "https://acct.table.core.windows.net"}, want: "https://acct.table.core.windows.net"},
		{name: "connection string setting", env: map[string]string{"OrderStore__connectionString": cs}, want: "OrderStore__connectionString"},
		{name: "bad flag", tables: "ftp://x", wantFail: "--tables"},
		{name: "nothing", wantFail: "OrderStore__serviceUri"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "ns"}
			for k, v := range tt.env {
				e[k] = v
			}
			tg, err := connect.ServiceBus(connect.Options{Tables: tt.tables, Dir: dir, Credential: fakeCred{}, Getenv: env(e)})
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Broker.Close(context.Background())
			_, desc, err := tg.Tables()
			if tt.wantFail != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantFail) {
					t.Fatalf("Tables() err = %v, want one naming %q", err, tt.wantFail)
				}
				return
			}
			if err != nil || !strings.Contains(desc, tt.want) || strings.Contains(desc, "a2V5") {
				t.Errorf("Tables() = %q, %v; want it to name %q and no key", desc, err, tt.want)
			}
		})
	}
}

// Resolve is for commands that work on Table Storage alone: with nothing
// naming a Service Bus it still resolves the account (--tables, the app
// settings) and says, in NoBroker, why there is no broker; with nothing at
// all, Tables names every way to give one. ServiceBus still refuses.
func TestResolveWithoutServiceBus(t *testing.T) {
	dir := t.TempDir() // no development host here
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:2/devstoreaccount1;"
	tests := []struct {
		name       string
		opts       connect.Options
		wantBroker bool
		wantTables string // in the description; "" for an error
		wantErr    []string
	}{
		{name: "--tables only", opts: connect.Options{Tables: cs}, wantTables: "http://127.0.0.1:2/devstoreaccount1"},
		{name: "the setting only", opts: connect.Options{Getenv: env(map[string]string{"OrderStore__serviceUri": "https://acct.table.core.windows.net"})},
			wantTables: "https://acct.table.core.windows.net"},
		{name: "a namespace too", opts: connect.Options{Namespace: "127.0.0.1", Tables: cs}, wantBroker: true, wantTables: "127.0.0.1:2"},
		{name: "nothing", opts: connect.Options{}, wantErr: []string{"--tables", "OrderStore__serviceUri", "make run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Dir, o.Credential = dir, fakeCred{}
			if o.Getenv == nil {
				o.Getenv = env(nil)
			}
			tg, err := connect.Resolve(o)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got := tg.Broker != nil; got != tt.wantBroker {
				t.Fatalf("Broker set %v, want %v (NoBroker %v)", got, tt.wantBroker, tg.NoBroker)
			}
			if tg.Broker != nil {
				defer tg.Broker.Close(context.Background())
				if tg.NoBroker != nil {
					t.Errorf("NoBroker = %v with a broker", tg.NoBroker)
				}
			} else if !errors.Is(tg.NoBroker, connect.ErrNoTarget) || !strings.Contains(tg.NoBroker.Error(), "--namespace") {
				t.Errorf("NoBroker = %v, want ErrNoTarget naming --namespace", tg.NoBroker)
			}
			_, desc, err := tg.Tables()
			if tt.wantTables == "" {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("Tables() err = %v, want one naming %q", err, w)
					}
				}
				return
			}
			if err != nil || !strings.Contains(desc, tt.wantTables) {
				t.Errorf("Tables() = %q, %v; want it to name %q", desc, err, tt.wantTables)
			}
			if _, err := connect.ServiceBus(o); tg.Broker == nil && !errors.Is(err, connect.ErrNoTarget) {
				t.Errorf("ServiceBus without a namespace = %v, want ErrNoTarget", err)
			}
		})
	}
}
