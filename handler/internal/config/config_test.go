package config

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

const azurite = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(EnvPort, "8080", EnvStoreConnectionString, azurite))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{Port: 8080, Queue: "order-status", PoisonQueue: "order-status-poison", StoreConnectionString: azurite,
		StoreTable: "orderstatus", RetryBudget: 5 * time.Second, PaymentTimeout: 30 * time.Minute, LogLevel: slog.LevelInfo,
		Retry: Retry{Reschedule: true, Base: 10 * time.Second, Cap: 5 * time.Minute, Window: 24 * time.Hour},
		DeadLetter: DeadLetter{Schedule: "0 */5 * * * *", Cooldown: 10 * time.Minute, MaxReplays: 3, SweepRate: 10,
			Table: "deadletters", Retention: 720 * time.Hour}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}

func TestLoadDeadLetterStore(t *testing.T) {
	d, err := LoadDeadLetter(env(EnvDeadLetterTable, "dlprod", EnvDeadLetterRetention, "168h"))
	if err != nil || d.Table != "dlprod" || d.Retention != 7*24*time.Hour {
		t.Errorf("LoadDeadLetter = table %q, retention %s, %v; want dlprod, 168h", d.Table, d.Retention, err)
	}
	for _, ok := range []string{"1h", "8760h"} {
		if d, err := LoadDeadLetter(env(EnvDeadLetterRetention, ok)); err != nil {
			t.Errorf("retention %s: %v (%+v), want it accepted", ok, err, d)
		}
	}
}

// The payment timeout defaults to the contract's and is a setting.
func TestLoadPaymentTimeout(t *testing.T) {
	c, err := Load(env(EnvPort, "8080", EnvStoreConnectionString, azurite))
	if err != nil || c.PaymentTimeout != 30*time.Minute {
		t.Errorf("default payment timeout %s, %v; want 30m", c.PaymentTimeout, err)
	}
	c, err = Load(env(EnvPort, "8080", EnvStoreConnectionString, azurite, EnvPaymentTimeout, "20s"))
	if err != nil || c.PaymentTimeout != 20*time.Second {
		t.Errorf("%s=20s: %s, %v; want 20s", EnvPaymentTimeout, c.PaymentTimeout, err)
	}
}

// Rescheduling off is the policy before it, with that policy's budget.
func TestLoadReschedulingOff(t *testing.T) {
	c, err := Load(env(EnvPort, "8080", EnvStoreConnectionString, azurite, EnvRetryReschedule, "false"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Retry.Reschedule || c.RetryBudget != 20*time.Second {
		t.Errorf("reschedule %v, budget %s; want false and 20s", c.Retry.Reschedule, c.RetryBudget)
	}
	c, err = Load(env(EnvPort, "8080", EnvStoreConnectionString, azurite, EnvRetryBase, "50ms", EnvRetryCap, "1s", EnvRetryWindow, "30s"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Retry{Reschedule: true, Base: 50 * time.Millisecond, Cap: time.Second, Window: 30 * time.Second}); c.Retry != want {
		t.Errorf("Retry = %+v, want %+v", c.Retry, want)
	}
}

func TestLoadProduction(t *testing.T) {
	c, err := Load(env(EnvPort, "40000", EnvStoreServiceURI, "https://st1.table.core.windows.net",
		EnvServiceBusNamespace, "sb-1.servicebus.windows.net", EnvClientID, "abc", EnvRetryBudget, "5s", EnvLogLevel, "DEBUG"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.ServiceBusNamespace != "sb-1.servicebus.windows.net" || c.RetryBudget != 5*time.Second || c.LogLevel != slog.LevelDebug || c.ClientID != "abc" {
		t.Errorf("got %+v", c)
	}
}

func TestLoadErrorsNameTheSetting(t *testing.T) {
	base := []string{EnvPort, "8080", EnvStoreConnectionString, azurite}
	with := func(kv ...string) func(string) string {
		m := append(slices.Clone(base), kv...)
		return env(m...)
	}
	tests := []struct {
		name    string
		getenv  func(string) string
		setting string
	}{
		{"port missing", env(EnvStoreConnectionString, azurite), EnvPort},
		{"port not a number", with(EnvPort, "x"), EnvPort},
		{"port out of range", with(EnvPort, "70000"), EnvPort},
		{"no store", env(EnvPort, "8080"), EnvStoreServiceURI},
		{"both stores", with(EnvStoreServiceURI, "https://a.table.core.windows.net"), EnvStoreConnectionString},
		{"service uri not a url", env(EnvPort, "1", EnvStoreServiceURI, "table.core.windows.net"), EnvStoreServiceURI},
		{"service uri with a SAS", env(EnvPort, "1", EnvStoreServiceURI, "https://a.table.core.windows.net/?sv=1&sig=AccountKey"), EnvStoreServiceURI},
		{"connection string without account", with(EnvStoreConnectionString, "foo=bar"), EnvStoreConnectionString},
		{"bad table", with(EnvStoreTable, "order-status"), EnvStoreTable},
		{"table too short", with(EnvStoreTable, "ab"), EnvStoreTable},
		{"bad queue", with(EnvQueue, "bad queue"), EnvQueue},
		{"same queues", with(EnvPoisonQueue, "order-status"), EnvPoisonQueue},
		{"namespace with scheme", with(EnvServiceBusNamespace, "sb://x.servicebus.windows.net"), EnvServiceBusNamespace},
		{"budget not a duration", with(EnvRetryBudget, "20"), EnvRetryBudget},
		{"budget zero", with(EnvRetryBudget, "0s"), EnvRetryBudget},
		{"budget above lock margin", with(EnvRetryBudget, "50s"), EnvRetryBudget},
		{"reschedule not a bool", with(EnvRetryReschedule, "maybe"), EnvRetryReschedule},
		{"base not a duration", with(EnvRetryBase, "10"), EnvRetryBase},
		{"cap above the duplicate detection window", with(EnvRetryCap, "11m"), EnvRetryCap},
		{"cap below base", with(EnvRetryBase, "1m", EnvRetryCap, "30s"), EnvRetryCap},
		{"window of 7 days", with(EnvRetryWindow, "168h"), EnvRetryWindow},
		{"window below cap", with(EnvRetryWindow, "1m"), EnvRetryWindow},
		{"payment timeout not a duration", with(EnvPaymentTimeout, "30"), EnvPaymentTimeout},
		{"payment timeout zero", with(EnvPaymentTimeout, "0s"), EnvPaymentTimeout},
		{"payment timeout past the TTL", with(EnvPaymentTimeout, "168h"), EnvPaymentTimeout},
		{"log level", with(EnvLogLevel, "loud"), EnvLogLevel},
		{"dev broker not loopback", with(EnvDevBrokerURL, "http://10.0.0.1:80"), EnvDevBrokerURL},
		{"sweep schedule not six fields", with(EnvDeadLetterSweepSchedule, "*/5 * * * *"), EnvDeadLetterSweepSchedule},
		{"cooldown not a duration", with(EnvDeadLetterCooldown, "10"), EnvDeadLetterCooldown},
		{"cooldown negative", with(EnvDeadLetterCooldown, "-1m"), EnvDeadLetterCooldown},
		{"max replays negative", with(EnvDeadLetterMaxReplays, "-1"), EnvDeadLetterMaxReplays},
		{"max replays not a number", with(EnvDeadLetterMaxReplays, "three"), EnvDeadLetterMaxReplays},
		{"sweep rate zero", with(EnvDeadLetterSweepRate, "0"), EnvDeadLetterSweepRate},
		{"sweep rate NaN", with(EnvDeadLetterSweepRate, "NaN"), EnvDeadLetterSweepRate},
		{"dead-letter table name", with(EnvDeadLetterTable, "dead-letters"), EnvDeadLetterTable},
		{"dead-letter table is the order table", with(EnvDeadLetterTable, "OrderStatus"), EnvDeadLetterTable},
		{"retention not a duration", with(EnvDeadLetterRetention, "30d"), EnvDeadLetterRetention},
		{"retention below an hour", with(EnvDeadLetterRetention, "59m"), EnvDeadLetterRetention},
		{"retention above a year", with(EnvDeadLetterRetention, "8761h"), EnvDeadLetterRetention},
		{"dev broker and namespace", with(EnvDevBrokerURL, "http://127.0.0.1:9", EnvServiceBusNamespace, "x.servicebus.windows.net"), EnvDevBrokerURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.getenv)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), tt.setting) {
				t.Errorf("error %q does not name %s", err, tt.setting)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if strings.Contains(err.Error(), "AccountKey") {
				t.Errorf("error leaks the connection string: %q", err)
			}
		})
	}
}

func TestUseDevelopmentStorage(t *testing.T) {
	c, err := Load(env(EnvPort, "1", EnvStoreConnectionString, "UseDevelopmentStorage=true"))
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreConnectionString != DevelopmentStorage {
		t.Errorf("connection string = %q, want Azurite's default", c.StoreConnectionString)
	}
}

// templateSettings are the settings this package reads that
// local.settings.json.template lists; allSettings adds the retired ones.
var (
	templateSettings = []string{EnvPort, EnvQueue, EnvPoisonQueue, EnvServiceBusNamespace, EnvServiceBusClientID,
		EnvDevBrokerURL, EnvStoreServiceURI, EnvStoreConnectionString, EnvStoreTable, EnvClientID, EnvRetryBudget, EnvLogLevel,
		EnvRetryReschedule, EnvRetryBase, EnvRetryCap, EnvRetryWindow, EnvPaymentTimeout,
		EnvDeadLetterSweepSchedule, EnvDeadLetterCooldown, EnvDeadLetterMaxReplays, EnvDeadLetterSweepRate,
		EnvDeadLetterTable, EnvDeadLetterRetention}
	allSettings = slices.Clone(templateSettings)
)

// TestReadmeConfigurationTable keeps the Configuration table (docs/configuration.md) in
// step with the settings this package reads: every one has a row, every
// row's handler setting is read here, and the dead-letter store's rows
// give the defaults the code uses.
func TestReadmeConfigurationTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Configuration\n")
	if !ok {
		t.Fatal("docs/configuration.md has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{} // setting -> its row
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, name := range strings.Split(cells[1], ",") {
			rows[strings.Trim(strings.TrimSpace(name), "`")] = line
		}
	}
	for _, name := range allSettings {
		if _, ok := rows[name]; !ok {
			t.Errorf("docs/configuration.md has no row for %s", name)
		}
	}
	for name := range rows {
		if strings.HasSuffix(name, "*") || name == "ServiceBusConnection__credential" {
			continue // read by the Functions host
		}
		if !slices.Contains(allSettings, name) {
			t.Errorf("docs/configuration.md lists %s, which the handler does not read", name)
		}
	}
	for name, def := range map[string]string{EnvDeadLetterTable: DefaultDeadLetterTable, EnvDeadLetterRetention: "720h"} {
		if cells := strings.Split(rows[name], "|"); len(cells) < 4 || strings.TrimSpace(cells[2]) != "`"+def+"`" {
			t.Errorf("docs/configuration.md row of %s = %q, want the default `%s`", name, rows[name], def)
		}
	}
	if got := fmtDuration(DefaultDeadLetterRetention); got != "720h" {
		t.Errorf("default retention %s, want docs/configuration.md's 720h", got)
	}
}

// TestTemplateListsEverySetting keeps local.settings.json.template (which
// the infra checks read) in step with the settings this package reads.
func TestTemplateListsEverySetting(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "local.settings.json.template"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct{ Values map[string]string }
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatalf("template: %v", err)
	}
	// Set by the Functions host or the development host, not by users.
	hostSet := map[string]bool{EnvPort: true, EnvDevBrokerURL: true}
	for _, name := range templateSettings {
		if _, ok := tpl.Values[name]; !ok && !hostSet[name] {
			t.Errorf("local.settings.json.template lacks %s", name)
		}
	}
	if got := tpl.Values[EnvDeadLetterTable]; got != DefaultDeadLetterTable {
		t.Errorf("template %s = %q, want the default %q", EnvDeadLetterTable, got, DefaultDeadLetterTable)
	}
	if got, err := time.ParseDuration(tpl.Values[EnvDeadLetterRetention]); err != nil || got != DefaultDeadLetterRetention {
		t.Errorf("template %s = %q, want the default %s", EnvDeadLetterRetention, tpl.Values[EnvDeadLetterRetention], DefaultDeadLetterRetention)
	}
}

// TestDocsNameOnlySettingsTheHandlerReads: every ORDER_STATUS_* and
// DEAD_LETTER_* setting the README, the docs pages and the runbooks name
// is one the handler reads, so a removed setting (DEAD_LETTER_SWEEP_MAX
// once survived in the README) cannot stay documented.
func TestDocsNameOnlySettingsTheHandlerReads(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	pages := []string{filepath.Join(root, "README.md"), filepath.Join(root, "alerts", "README.md")}
	for _, dir := range []string{"docs", filepath.Join("alerts", "runbooks")} {
		more, err := filepath.Glob(filepath.Join(root, dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, more...)
	}
	setting := regexp.MustCompile(`\b(?:ORDER_STATUS|DEAD_LETTER)_[A-Z0-9_]*[A-Z0-9]\b`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range sortedUnique(setting.FindAllString(string(b), -1)) {
			if !slices.Contains(allSettings, name) {
				t.Errorf("%s names %s, which the handler does not read", p, name)
			}
		}
	}
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
