// Package config reads and validates the handler's settings from the environment
// (names as in local.settings.json.template); an error names the bad setting.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// Setting names.
const (
	EnvPort                  = "FUNCTIONS_CUSTOMHANDLER_PORT"
	EnvQueue                 = "ORDER_STATUS_QUEUE"
	EnvPoisonQueue           = "POISON_QUEUE"
	EnvServiceBusNamespace   = "ServiceBusConnection__fullyQualifiedNamespace"
	EnvServiceBusClientID    = "ServiceBusConnection__clientId"
	EnvDevBrokerURL          = "ORDERSTATUS_DEV_BROKER_URL"
	EnvStoreServiceURI       = "OrderStore__serviceUri"
	EnvStoreConnectionString = "OrderStore__connectionString"
	EnvStoreTable            = "OrderStore__tableName"
	EnvClientID              = "AZURE_CLIENT_ID"
	EnvRetryBudget           = "ORDER_STATUS_RETRY_BUDGET"
	// Rescheduling (outages become delays; docs/outages.md).
	EnvRetryReschedule = "ORDER_STATUS_RETRY_RESCHEDULE"
	EnvRetryBase       = "ORDER_STATUS_RETRY_BASE"
	EnvRetryCap        = "ORDER_STATUS_RETRY_CAP"
	EnvRetryWindow     = "ORDER_STATUS_RETRY_WINDOW"
	// EnvPaymentTimeout is the payment timeout (docs/messages.md, "Payment timeout").
	EnvPaymentTimeout = "ORDER_STATUS_PAYMENT_TIMEOUT"
	EnvLogLevel       = "LOG_LEVEL"

	// The dead-letter sweeper (DeadLetterSweeper and orderstatus deadletters).
	EnvDeadLetterSweepSchedule = "DEAD_LETTER_SWEEP_SCHEDULE"
	EnvDeadLetterCooldown      = "DEAD_LETTER_REPLAY_COOLDOWN"
	EnvDeadLetterMaxReplays    = "DEAD_LETTER_MAX_REPLAYS"
	EnvDeadLetterSweepRate     = "DEAD_LETTER_SWEEP_RATE"
	// The dead-letter store's table and how long it keeps closed entries (dlstore/dltable).
	EnvDeadLetterTable     = "DEAD_LETTER_TABLE"
	EnvDeadLetterRetention = "DEAD_LETTER_RETENTION"
)

// Defaults.
const (
	DefaultQueue       = "order-status"
	DefaultPoisonQueue = "order-status-poison"
	DefaultTable       = "orderstatus"
	// DefaultRetryBudget(NoReschedule) is the in-call budget with rescheduling on (off).
	DefaultRetryBudget             = 5 * time.Second
	DefaultRetryBudgetNoReschedule = 20 * time.Second
	// MaxRetryBudget keeps the in-call retries well below the 1 min lock.
	MaxRetryBudget = 45 * time.Second

	// Rescheduling defaults (package reschedule): docs/outages.md, "The defaults and their reasons".
	DefaultRetryReschedule = true
	DefaultRetryBase       = reschedule.DefaultBase
	DefaultRetryCap        = reschedule.DefaultCap
	DefaultRetryWindow     = reschedule.DefaultWindow
	// MaxRetryCap keeps two copies of an attempt within the 10-minute duplicate detection window.
	MaxRetryCap = 10 * time.Minute
	// MaxRetryWindow stays below the queue's 7-day time to live.
	MaxRetryWindow = 6 * 24 * time.Hour
	// DefaultPaymentTimeout is the payment timeout; MaxPaymentTimeout stays within the 7-day TTL.
	DefaultPaymentTimeout = contract.PaymentTimeout
	MaxPaymentTimeout     = 6 * 24 * time.Hour

	DefaultDeadLetterSweepSchedule = "0 */5 * * * *"
	DefaultDeadLetterCooldown      = 10 * time.Minute
	DefaultDeadLetterMaxReplays    = 3
	DefaultDeadLetterSweepRate     = 10.0
	DefaultDeadLetterTable         = "deadletters"
	DefaultDeadLetterRetention     = 30 * 24 * time.Hour
	// DEAD_LETTER_RETENTION's bounds: an hour (no purge races a closing action) to a year.
	MinDeadLetterRetention = time.Hour
	MaxDeadLetterRetention = 365 * 24 * time.Hour
)

// DeadLetter is the sweeper's part of the configuration.
type DeadLetter struct {
	// Schedule is the timer's NCRONTAB expression; the handler checks only its shape.
	Schedule   string
	Cooldown   time.Duration
	MaxReplays int
	SweepRate  float64
	// Table is the dead-letter store's table; Retention how long closed entries are kept.
	Table     string
	Retention time.Duration
}

// Retry is the rescheduling part of the configuration.
type Retry struct {
	// Reschedule reschedules a copy of a message failing past the budget; false answers 5xx.
	Reschedule bool
	// Base and Cap bound the full-jitter backoff; Window is the time until RetryWindowExceeded.
	Base, Cap, Window time.Duration
}

// Config is the validated configuration of the handler process.
type Config struct {
	Port        int
	Queue       string
	PoisonQueue string

	// Service Bus: the namespace or the dev host's broker URL; with neither, poison gets 5xx.
	ServiceBusNamespace string
	ServiceBusClientID  string
	DevBrokerURL        string

	// Table Storage: exactly one of the two.
	StoreServiceURI       string
	StoreConnectionString string
	StoreTable            string

	// ClientID is the user-assigned identity for azidentity (may be empty).
	ClientID    string
	RetryBudget time.Duration
	// PaymentTimeout is how long after its Created an unpaid order is cancelled.
	PaymentTimeout time.Duration
	LogLevel       slog.Level

	Retry Retry

	DeadLetter DeadLetter
}

var (
	tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{2,62}$`)
	queueName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,259}$`)
	hostName  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$`)
)

// Load reads the configuration through getenv; the error names the first bad setting.
func Load(getenv func(string) string) (Config, error) {
	get := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		Queue:                 get(EnvQueue, DefaultQueue),
		PoisonQueue:           get(EnvPoisonQueue, DefaultPoisonQueue),
		ServiceBusNamespace:   get(EnvServiceBusNamespace, ""),
		ServiceBusClientID:    get(EnvServiceBusClientID, ""),
		DevBrokerURL:          get(EnvDevBrokerURL, ""),
		StoreServiceURI:       get(EnvStoreServiceURI, ""),
		StoreConnectionString: get(EnvStoreConnectionString, ""),
		StoreTable:            get(EnvStoreTable, DefaultTable),
		ClientID:              get(EnvClientID, ""),
	}

	port := get(EnvPort, "")
	if port == "" {
		return c, missing(EnvPort, "the Functions host sets it; to run by hand use e.g. "+EnvPort+"=8080, or 'orderstatus-dev dev'")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return c, invalid(EnvPort, port, "want a TCP port 1-65535")
	}
	c.Port = p

	for _, q := range []struct{ name, val string }{{EnvQueue, c.Queue}, {EnvPoisonQueue, c.PoisonQueue}} {
		if !queueName.MatchString(q.val) {
			return c, invalid(q.name, q.val, "want a Service Bus queue name")
		}
	}
	if c.Queue == c.PoisonQueue {
		return c, invalid(EnvPoisonQueue, c.PoisonQueue, "must differ from "+EnvQueue)
	}

	if c.ServiceBusNamespace != "" {
		if strings.Contains(c.ServiceBusNamespace, "://") || !hostName.MatchString(c.ServiceBusNamespace) {
			return c, invalid(EnvServiceBusNamespace, c.ServiceBusNamespace, "want a host name like <namespace>.servicebus.windows.net")
		}
	}
	if c.DevBrokerURL != "" {
		u, err := url.Parse(c.DevBrokerURL)
		if err != nil || u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") {
			return c, invalid(EnvDevBrokerURL, c.DevBrokerURL, "want an http://127.0.0.1:<port> URL (set by 'orderstatus-dev dev')")
		}
		if c.ServiceBusNamespace != "" {
			return c, invalid(EnvDevBrokerURL, c.DevBrokerURL, "set only one of "+EnvDevBrokerURL+" and "+EnvServiceBusNamespace)
		}
	}

	switch {
	case c.StoreServiceURI == "" && c.StoreConnectionString == "":
		return c, missing(EnvStoreServiceURI, "or "+EnvStoreConnectionString+" (Azurite and local runs)")
	case c.StoreServiceURI != "" && c.StoreConnectionString != "":
		return c, invalid(EnvStoreConnectionString, "<redacted>", "set only one of "+EnvStoreServiceURI+" and "+EnvStoreConnectionString)
	case c.StoreServiceURI != "":
		u, err := url.Parse(c.StoreServiceURI)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			return c, invalid(EnvStoreServiceURI, redactURL(c.StoreServiceURI), "want https://<account>.table.core.windows.net (no query: the app signs in with its identity)")
		}
	case strings.EqualFold(strings.TrimSuffix(c.StoreConnectionString, ";"), "UseDevelopmentStorage=true"):
		c.StoreConnectionString = DevelopmentStorage
	default:
		if !strings.Contains(c.StoreConnectionString, "AccountName=") {
			return c, invalid(EnvStoreConnectionString, "<redacted>", "want a storage connection string with AccountName=, or UseDevelopmentStorage=true")
		}
	}
	if !tableName.MatchString(c.StoreTable) {
		return c, invalid(EnvStoreTable, c.StoreTable, "want 3-63 letters and digits, starting with a letter")
	}

	r, err := loadRetry(get)
	if err != nil {
		return c, err
	}
	c.Retry = r
	c.RetryBudget = DefaultRetryBudget
	if !r.Reschedule {
		c.RetryBudget = DefaultRetryBudgetNoReschedule
	}
	if err := duration(get, EnvRetryBudget, &c.RetryBudget, time.Nanosecond, MaxRetryBudget, "well below the 1 min lock"); err != nil {
		return c, err
	}
	c.PaymentTimeout = DefaultPaymentTimeout
	if err := duration(get, EnvPaymentTimeout, &c.PaymentTimeout, time.Nanosecond, MaxPaymentTimeout, "such as 30m"); err != nil {
		return c, err
	}

	c.LogLevel = slog.LevelInfo
	if s := get(EnvLogLevel, ""); s != "" {
		if err := c.LogLevel.UnmarshalText([]byte(s)); err != nil {
			return c, invalid(EnvLogLevel, s, "want debug, info, warn or error")
		}
	}
	dl, err := LoadDeadLetter(getenv)
	if err != nil {
		return c, err
	}
	if strings.EqualFold(dl.Table, c.StoreTable) {
		return c, invalid(EnvDeadLetterTable, dl.Table, "must differ from "+EnvStoreTable)
	}
	c.DeadLetter = dl
	return c, nil
}

func loadRetry(get func(k, def string) string) (Retry, error) {
	r := Retry{Reschedule: DefaultRetryReschedule, Base: DefaultRetryBase, Cap: DefaultRetryCap, Window: DefaultRetryWindow}
	if s := get(EnvRetryReschedule, ""); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return r, invalid(EnvRetryReschedule, s, "want true or false")
		}
		r.Reschedule = v
	}
	for _, d := range []struct {
		name     string
		dst      *time.Duration
		min, max time.Duration
	}{
		{EnvRetryBase, &r.Base, time.Millisecond, time.Hour},
		{EnvRetryCap, &r.Cap, time.Millisecond, MaxRetryCap},
		{EnvRetryWindow, &r.Window, time.Millisecond, MaxRetryWindow},
	} {
		if err := duration(get, d.name, d.dst, d.min, d.max, ""); err != nil {
			return r, err
		}
	}
	switch {
	case r.Cap < r.Base:
		return r, invalid(EnvRetryCap, r.Cap.String(), "must be at least "+EnvRetryBase+" ("+r.Base.String()+")")
	case r.Window < r.Cap:
		return r, invalid(EnvRetryWindow, r.Window.String(), "must be at least "+EnvRetryCap+" ("+r.Cap.String()+")")
	}
	return r, nil
}

// LoadDeadLetter reads the sweeper's settings (the CLI too); the error names the first bad one.
func LoadDeadLetter(getenv func(string) string) (DeadLetter, error) {
	get := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	d := DeadLetter{
		Schedule:   get(EnvDeadLetterSweepSchedule, DefaultDeadLetterSweepSchedule),
		Cooldown:   DefaultDeadLetterCooldown,
		MaxReplays: DefaultDeadLetterMaxReplays,
		SweepRate:  DefaultDeadLetterSweepRate,
		Table:      get(EnvDeadLetterTable, DefaultDeadLetterTable),
		Retention:  DefaultDeadLetterRetention,
	}
	if n := len(strings.Fields(d.Schedule)); n != 6 {
		return d, invalid(EnvDeadLetterSweepSchedule, d.Schedule, "want a six-field NCRONTAB expression such as \"0 */5 * * * *\"")
	}
	if err := duration(get, EnvDeadLetterCooldown, &d.Cooldown, 0, 7*24*time.Hour, "such as 10m"); err != nil {
		return d, err
	}
	if s := get(EnvDeadLetterMaxReplays, ""); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 100 {
			return d, invalid(EnvDeadLetterMaxReplays, s, "want a whole number from 0 to 100")
		}
		d.MaxReplays = v
	}
	if s := get(EnvDeadLetterSweepRate, ""); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) || v > 1000 {
			return d, invalid(EnvDeadLetterSweepRate, s, "want actions per second above 0 and at most 1000, such as 10")
		}
		d.SweepRate = v
	}
	if err := duration(get, EnvDeadLetterRetention, &d.Retention, MinDeadLetterRetention, MaxDeadLetterRetention, "such as 720h (30 days)"); err != nil {
		return d, err
	}
	if !tableName.MatchString(d.Table) {
		return d, invalid(EnvDeadLetterTable, d.Table, "want 3-63 letters and digits, starting with a letter")
	}
	return d, nil
}

// duration sets *dst from setting name when it is set: a Go duration from
// min to max (above 0 when min is 1ns), or an error naming the setting.
func duration(get func(k, def string) string, name string, dst *time.Duration, min, max time.Duration, example string) error {
	s := get(name, "")
	if s == "" {
		return nil
	}
	v, err := time.ParseDuration(s)
	if err == nil && v >= min && v <= max {
		*dst = v
		return nil
	}
	want := fmt.Sprintf("want a Go duration from %s to %s", fmtDuration(min), fmtDuration(max))
	if min == time.Nanosecond {
		want = "want a Go duration above 0 and at most " + fmtDuration(max)
	}
	if example != "" {
		want += ", " + example
	}
	return invalid(name, s, want)
}

// fmtDuration writes whole hours as "168h", and the rest as Go does.
func fmtDuration(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	if d == 0 {
		return "0s"
	}
	return d.String()
}

// DevelopmentStorage is UseDevelopmentStorage=true: Azurite with its public well-known account.
const DevelopmentStorage = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"

// redactURL drops a URL's query and user info, where secrets would be.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			return s[:i]
		}
		return s
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// ErrSetting is wrapped by every error Load returns.
var ErrSetting = errors.New("config")

func missing(name, hint string) error {
	return fmt.Errorf("%w: %s is not set (%s)", ErrSetting, name, hint)
}

func invalid(name, value, want string) error {
	return fmt.Errorf("%w: %s=%q is invalid: %s", ErrSetting, name, value, want)
}
