// Package connect decides where `orderstatus deadletters` and `orderstatus
// publish` connect: a flag (--namespace, --tables); else the app settings as
// in Azure (ServiceBusConnection__fullyQualifiedNamespace,
// OrderStore__serviceUri or OrderStore__connectionString) with the caller's
// Entra identity (azidentity.DefaultAzureCredential); else the development
// host of `make run` (package devrun). Nothing here contacts a service.
package connect

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/sbbroker"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
)

// Options say what the caller asked for; the zero value means "from the
// environment, else the running development host".
type Options struct {
	// Namespace overrides the Service Bus namespace
	// (<name>[.servicebus.windows.net]).
	Namespace string
	// Tables overrides the Table Storage account (URL or connection string).
	Tables string
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// Dir starts the search for a development host (default ".").
	Dir string
	// Credential overrides DefaultAzureCredential (tests).
	Credential azcore.TokenCredential
}

// Target is where the commands connect, and how to say so in one line.
type Target struct {
	// Broker is the Service Bus port, closed by the caller, or nil.
	Broker broker.Broker
	// NoBroker is why there is no Broker (wrapping ErrNoTarget).
	NoBroker error
	// Queue and PoisonQueue: the dev host's, ORDER_STATUS_QUEUE /
	// POISON_QUEUE, or the defaults.
	Queue, PoisonQueue string
	// Describe says where Broker points, e.g. "the development host".
	Describe string
	// DevHost is set when the target is a running development host.
	DevHost *devrun.Endpoints

	opts Options
	cred azcore.TokenCredential
}

// ErrNoTarget: nothing names a namespace and no development host runs.
var ErrNoTarget = errors.New("connect: no Service Bus to connect to")

// ServiceBus resolves the broker: ErrNoTarget when nothing names one.
func ServiceBus(opts Options) (*Target, error) {
	t, err := Resolve(opts)
	if err != nil {
		return nil, err
	}
	if t.Broker == nil {
		return nil, t.NoBroker
	}
	return t, nil
}

// Resolve is ServiceBus, except that no broker named is no error: NoBroker
// says why, and Tables still works. A malformed namespace is an error.
func Resolve(opts Options) (*Target, error) {
	o := opts.withDefaults()
	t := &Target{
		opts:        o,
		Queue:       orDefault(o.Getenv(config.EnvQueue), config.DefaultQueue),
		PoisonQueue: orDefault(o.Getenv(config.EnvPoisonQueue), config.DefaultPoisonQueue),
	}
	ns := strings.TrimSpace(o.Namespace)
	from := "--namespace"
	if ns == "" {
		ns, from = strings.TrimSpace(o.Getenv(config.EnvServiceBusNamespace)), config.EnvServiceBusNamespace
	}
	if ns != "" {
		ns, err := Namespace(ns)
		if err != nil {
			return nil, fmt.Errorf("connect: %s: %w", from, err)
		}
		cred, err := t.credential()
		if err != nil {
			return nil, err
		}
		b, err := sbbroker.New(ns, cred, nil)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		t.Broker = b
		t.Describe = fmt.Sprintf("Service Bus %s (your Entra identity)", ns)
		return t, nil
	}
	dev, err := devrun.Find(o.Dir)
	if err != nil {
		if errors.Is(err, devrun.ErrNotRunning) {
			t.NoBroker = fmt.Errorf("%w: pass --namespace, set %s, or start the development host with 'make run' (%v)",
				ErrNoTarget, config.EnvServiceBusNamespace, err)
			t.Describe = "no Service Bus"
			return t, nil
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	b, err := loopback.NewClient(dev.BrokerURL, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: development host: %w", err)
	}
	t.Broker, t.DevHost = b, &dev
	t.Queue, t.PoisonQueue = orDefault(dev.Queue, t.Queue), orDefault(dev.PoisonQueue, t.PoisonQueue)
	t.Describe = fmt.Sprintf("the development host (make run, pid %d, broker %s)", dev.PID, dev.BrokerURL)
	return t, nil
}

// Tables resolves the Table Storage account (--tables, OrderStore__serviceUri
// or OrderStore__connectionString, the development host).
func (t *Target) Tables() (*aztables.ServiceClient, string, error) {
	v, from := t.tablesSetting()
	switch {
	case v == "" && t.Broker == nil:
		return nil, "", fmt.Errorf("connect: no Table Storage account: pass --tables, set %s, or start the development host with 'make run'",
			config.EnvStoreServiceURI)
	case v == "":
		return nil, "", fmt.Errorf("connect: no Table Storage account: pass --tables or set %s", config.EnvStoreServiceURI)
	}
	if isConnectionString(v) {
		svc, err := aztables.NewServiceClientFromConnectionString(v, nil)
		if err != nil {
			// The SDK's message does not quote the secret.
			return nil, "", fmt.Errorf("connect: %s: connection string: %w", from, err)
		}
		return svc, fmt.Sprintf("Table Storage %s (connection string from %s)", account(v), from), nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, "", fmt.Errorf("connect: %s %q: want https://<account>.table.core.windows.net or a connection string", from, v)
	}
	cred, err := t.credential()
	if err != nil {
		return nil, "", err
	}
	svc, err := aztables.NewServiceClient(v, cred, nil)
	if err != nil {
		return nil, "", fmt.Errorf("connect: %s: %w", from, err)
	}
	return svc, fmt.Sprintf("Table Storage %s (your Entra identity)", v), nil
}

// tablesSetting is the account Tables resolves ("" for none) and its source.
func (t *Target) tablesSetting() (v, from string) {
	o := t.opts
	v, from = strings.TrimSpace(o.Tables), "--tables"
	if v == "" {
		v, from = strings.TrimSpace(o.Getenv(config.EnvStoreServiceURI)), config.EnvStoreServiceURI
	}
	if v == "" {
		v, from = strings.TrimSpace(o.Getenv(config.EnvStoreConnectionString)), config.EnvStoreConnectionString
	}
	if v == "" && t.DevHost != nil {
		v, from = t.DevHost.StoreServiceURI, "the development host"
		if t.DevHost.StoreConnectionString != "" {
			v = t.DevHost.StoreConnectionString
		}
	}
	return v, from
}

func (t *Target) credential() (azcore.TokenCredential, error) {
	if t.cred != nil {
		return t.cred, nil
	}
	if t.opts.Credential != nil {
		t.cred = t.opts.Credential
		return t.cred, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("connect: Entra credential (try 'az login'): %w", err)
	}
	t.cred = cred
	return cred, nil
}

// Namespace normalises "sb-x" (or an sb:// or https:// URL of it) to
// sb-x.servicebus.windows.net.
func Namespace(s string) (string, error) {
	s = strings.TrimSpace(s)
	for _, p := range []string{"sb://", "https://"} {
		s = strings.TrimPrefix(s, p)
	}
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return "", errors.New("empty namespace")
	}
	if !strings.Contains(s, ".") {
		s += ".servicebus.windows.net"
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" ||
			strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", fmt.Errorf("namespace %q: want <name>.servicebus.windows.net", s)
		}
	}
	return s, nil
}

// account names a connection string's account, without secrets.
func account(cs string) string {
	name := ""
	for _, part := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "TableEndpoint"):
			return v
		case strings.EqualFold(k, "AccountName"):
			name = v
		case strings.EqualFold(k, "UseDevelopmentStorage"):
			name = "development storage"
		}
	}
	return name
}

func isConnectionString(s string) bool {
	return strings.Contains(s, "=") && (strings.Contains(s, "AccountName=") || strings.Contains(s, "UseDevelopmentStorage=") ||
		strings.Contains(s, "TableEndpoint=") || strings.Contains(s, "SharedAccessSignature="))
}

func (o Options) withDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Dir == "" {
		o.Dir = "."
	}
	return o
}

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v != "" {
		return v
	}
	return def
}
