package funcapp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeApp lays out files (relative path -> content) under a temp dir.
func writeApp(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const minimalHost = `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"bin/handler"}}}`

const sbFunction = `{"bindings":[{"type":"serviceBusTrigger","direction":"in","name":"message",
  "queueName":"%ORDER_STATUS_QUEUE%","connection":"ServiceBusConnection","isSessionsEnabled":true,"dataType":"binary"}]}`

const timerFunction = `{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"%DEAD_LETTER_SWEEP_SCHEDULE%","useMonitor":true}]}`

const httpFunction = `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req","authLevel":"function","methods":["get"],"route":"orders/{orderId}"},{"type":"http","direction":"out","name":"res"}]}`

// TestRepositoryApp loads the repository's own host.json and function
// folders with the template's settings, so a change there that the
// development host cannot read fails here.
func TestRepositoryApp(t *testing.T) {
	root, err := filepath.Abs("../../../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "host.json")); err != nil {
		t.Skipf("repository root not found: %v", err)
	}
	app, err := Load(root, &LoadOptions{Defaults: map[string]string{"ORDER_STATUS_QUEUE": "order-status", "DEAD_LETTER_SWEEP_SCHEDULE": "0 */5 * * * *"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := app.Host.ExecutablePath, filepath.Join(root, "bin", "handler"); got != want {
		t.Errorf("ExecutablePath: got %q, want %q", got, want)
	}
	if !app.Host.EnableForwardingHTTPRequest {
		t.Errorf("EnableForwardingHTTPRequest: got false, want true")
	}
	var names []string
	for _, f := range app.Functions {
		names = append(names, f.Name)
	}
	for _, want := range []string{"GetOrder", "Metrics", "OrderStatus"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("functions: got %v, want %s among them", names, want)
		}
	}
}

func TestLoadHost(t *testing.T) {
	root := writeApp(t, map[string]string{"host.json": `{
	  "version": "2.0",
	  "functionTimeout": "00:05:00",
	  "customHandler": {"description": {"defaultExecutablePath": "bin/handler", "workingDirectory": "", "arguments": ["-x"]}, "enableForwardingHttpRequest": true},
	  "extensions": {"http": {"routePrefix": "/api/"},
	    "serviceBus": {"maxConcurrentSessions": 16, "maxConcurrentCallsPerSession": 1, "sessionIdleTimeout": "00:00:05",
	      "maxAutoLockRenewalDuration": "00:05:00", "clientRetryOptions": {"tryTimeout": "00:01:00", "delay": "00:00:00.80"}}}}`})
	h, err := LoadHost(root)
	if err != nil {
		t.Fatalf("LoadHost: %v", err)
	}
	want := Host{
		FunctionTimeout:             5 * time.Minute,
		ExecutablePath:              filepath.Join(root, "bin", "handler"),
		Arguments:                   []string{"-x"},
		WorkingDirectory:            root,
		EnableForwardingHTTPRequest: true,
		RoutePrefix:                 "api",
		ServiceBus: ServiceBus{
			MaxConcurrentSessions:        16,
			MaxConcurrentCallsPerSession: 1,
			SessionIdleTimeout:           5 * time.Second,
			MaxAutoLockRenewalDuration:   5 * time.Minute,
		},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("LoadHost:\n got %+v\nwant %+v", h, want)
	}
}

func TestLoadHostDefaults(t *testing.T) {
	root := writeApp(t, map[string]string{"host.json": minimalHost})
	h, err := LoadHost(root)
	if err != nil {
		t.Fatalf("LoadHost: %v", err)
	}
	if h.FunctionTimeout != DefaultFunctionTimeout || h.RoutePrefix != "api" ||
		h.ServiceBus.MaxConcurrentSessions != 8 || h.ServiceBus.MaxConcurrentCallsPerSession != 1 ||
		h.ServiceBus.SessionIdleTimeout != time.Minute || h.ServiceBus.MaxAutoLockRenewalDuration != 5*time.Minute {
		t.Errorf("defaults: got %+v", h)
	}
}

func TestLoadHostErrors(t *testing.T) {
	tests := []struct {
		name, host, want string
	}{
		{"missing file", "", "host.json"},
		{"bad json", `{`, "host.json"},
		{"no executable", `{"customHandler":{"description":{}}}`, "defaultExecutablePath"},
		{"bad timeout", `{"functionTimeout":"5 minutes","customHandler":{"description":{"defaultExecutablePath":"h"}}}`, "functionTimeout"},
		{"zero sessions", `{"customHandler":{"description":{"defaultExecutablePath":"h"}},"extensions":{"serviceBus":{"maxConcurrentSessions":0}}}`, "maxConcurrentSessions"},
		{"bad idle", `{"customHandler":{"description":{"defaultExecutablePath":"h"}},"extensions":{"serviceBus":{"sessionIdleTimeout":"x"}}}`, "sessionIdleTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			if tt.host != "" {
				files["host.json"] = tt.host
			}
			_, err := LoadHost(writeApp(t, files))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadHost: got %v, want an ErrConfig naming %q", err, tt.want)
			}
		})
	}
}

func TestParseTimeSpan(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"00:05:00", 5 * time.Minute, true},
		{"00:00:05", 5 * time.Second, true},
		{"00:00:00.80", 800 * time.Millisecond, true},
		{"01:02", time.Hour + 2*time.Minute, true},
		{"1.02:03:04.5", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond, true},
		{"2", 48 * time.Hour, true},
		{"-00:00:01", -time.Second, true},
		{"", 0, false},
		{"5m", 0, false},
		{"00:60:00", 0, false},
		{"24:00:00", 0, false},
		{"00:00:00.12345678", 0, false},
		{"1:2:3:4", 0, false},
		{"::", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTimeSpan(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseTimeSpan(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestLoadSettings(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		env        []string
		overrides  map[string]string
		want       Settings
		wantSource string
	}{
		{
			name:       "environment only",
			env:        []string{"A=1", "EMPTY=", "B=x=y"},
			want:       Settings{"A": "1", "B": "x=y"},
			wantSource: "environment",
		},
		{
			name:       "file, environment wins, empty dropped",
			files:      map[string]string{LocalSettingsFile: `{"IsEncrypted":false,"Values":{"A":"file","B":"file","C":"","N":5,"T":true}}`},
			env:        []string{"A=env", "B="},
			want:       Settings{"A": "env", "B": "file", "N": "5", "T": "true"},
			wantSource: LocalSettingsFile,
		},
		{
			name: "template when no local file",
			files: map[string]string{
				LocalSettingsExample: `{"Values":{"Q":"order-status"}}`,
			},
			want:       Settings{"Q": "order-status"},
			wantSource: LocalSettingsExample,
		},
		{
			name: "local file preferred over template",
			files: map[string]string{
				LocalSettingsFile:    `{"Values":{"Q":"mine"}}`,
				LocalSettingsExample: `{"Values":{"Q":"order-status","R":"r"}}`,
			},
			want:       Settings{"Q": "mine"},
			wantSource: LocalSettingsFile,
		},
		{
			name:       "overrides win and can unset",
			files:      map[string]string{LocalSettingsFile: `{"Values":{"A":"file","B":"file"}}`},
			env:        []string{"A=env"},
			overrides:  map[string]string{"A": "override", "B": ""},
			want:       Settings{"A": "override"},
			wantSource: LocalSettingsFile,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, source, err := LoadSettings(writeApp(t, tt.files), tt.env, tt.overrides)
			if err != nil {
				t.Fatalf("LoadSettings: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) || source != tt.wantSource {
				t.Errorf("got %v from %s, want %v from %s", got, source, tt.want, tt.wantSource)
			}
		})
	}
}

func TestLoadSettingsBadJSON(t *testing.T) {
	_, _, err := LoadSettings(writeApp(t, map[string]string{LocalSettingsFile: `{"Values":`}), nil, nil)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), LocalSettingsFile) {
		t.Errorf("got %v, want an ErrConfig naming %s", err, LocalSettingsFile)
	}
}

func TestResolve(t *testing.T) {
	s := Settings{"Q": "order-status", "P": "x"}
	tests := []struct {
		in, want, missing string
	}{
		{"%Q%", "order-status", ""},
		{"plain", "plain", ""},
		{"pre-%Q%-%P%", "pre-order-status-x", ""},
		{"%NOPE%", "", "NOPE"},
		{"%Q%%NOPE2%", "", "NOPE2"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := s.Resolve(tt.in)
			if tt.missing != "" {
				if !errors.Is(err, ErrUnresolved) || !strings.Contains(err.Error(), tt.missing) {
					t.Errorf("Resolve(%q): got %q, %v; want ErrUnresolved naming %s", tt.in, got, err, tt.missing)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestLoadFunctions(t *testing.T) {
	root := writeApp(t, map[string]string{
		"host.json":                                 minimalHost,
		"functions/OrderStatus/function.json":       sbFunction,
		"functions/DeadLetterSweeper/function.json": timerFunction,
		"functions/GetOrder/function.json":          httpFunction,
		"functions/Off/function.json":               `{"disabled":true,"bindings":[]}`,
		"functions/OffBySetting/function.json":      `{"bindings":[]}`,
		"functions/notafunction/readme.txt":         "x",
	})
	app, err := Load(root, &LoadOptions{
		Env:      []string{"ORDER_STATUS_QUEUE=q1", "AzureWebJobs.OffBySetting.Disabled=true"},
		Defaults: map[string]string{"ORDER_STATUS_QUEUE": "default", "DEAD_LETTER_SWEEP_SCHEDULE": "0 */5 * * * *"},
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, f := range app.Functions {
		names = append(names, f.Name)
	}
	if want := []string{"DeadLetterSweeper", "GetOrder", "OrderStatus"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("functions: got %v, want %v", names, want)
	}
	sb, ok := app.Functions[2].Trigger()
	if !ok || sb.Type != TypeServiceBusTrigger || sb.QueueName != "q1" || !sb.IsSessionsEnabled || sb.Name != "message" {
		t.Errorf("OrderStatus trigger: got %+v, ok=%v", sb, ok)
	}
	timer, _ := app.Functions[0].Trigger()
	if timer.Schedule != "0 */5 * * * *" || !timer.Monitor() {
		t.Errorf("DeadLetterSweeper trigger: got %+v", timer)
	}
	h, _ := app.Functions[1].Trigger()
	if h.Route != "orders/{orderId}" || !reflect.DeepEqual(h.Methods, []string{"get"}) {
		t.Errorf("GetOrder trigger: got %+v", h)
	}
}

func TestLoadFunctionsUnresolved(t *testing.T) {
	root := writeApp(t, map[string]string{
		"host.json": minimalHost,
		"functions/DeadLetterSweeper/function.json": timerFunction,
	})
	_, err := Load(root, &LoadOptions{Overrides: map[string]string{"DEAD_LETTER_SWEEP_SCHEDULE": ""}, Defaults: map[string]string{"DEAD_LETTER_SWEEP_SCHEDULE": "0 */5 * * * *"}})
	if !errors.Is(err, ErrUnresolved) {
		t.Fatalf("Load: got %v, want ErrUnresolved", err)
	}
	msg := err.Error()
	for _, want := range []string{"functions/DeadLetterSweeper/function.json", "DEAD_LETTER_SWEEP_SCHEDULE", "schedule"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q spans lines, want one", msg)
	}
}

func TestDeployedLayout(t *testing.T) {
	// Without a functions/ folder, function folders sit next to host.json.
	root := writeApp(t, map[string]string{
		"host.json":                 minimalHost,
		"OrderStatus/function.json": sbFunction,
		"bin/handler":               "",
	})
	fns, _, err := loadFunctions(root, Settings{"ORDER_STATUS_QUEUE": "q"})
	if err != nil || len(fns) != 1 || fns[0].Name != "OrderStatus" {
		t.Errorf("loadFunctions: got %+v, %v; want OrderStatus", fns, err)
	}
}
