// Package funcapp reads a Functions app as the Functions host does: host.json,
// each function folder's function.json and the app settings, with `%NAME%`
// binding expressions resolved. It performs no other I/O and starts nothing.
package funcapp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrConfig is wrapped by every error of this package.
var ErrConfig = errors.New("funcapp")

// App is a loaded Functions app.
type App struct {
	// Root is the app root: the directory holding host.json.
	Root string
	Host Host
	// Functions are sorted by name; disabled functions are left out.
	Functions []Function
	// Disabled are the functions left out, sorted (see DisabledBy).
	Disabled []DisabledFunction
	// Settings are the resolved app settings (see LoadSettings).
	Settings Settings
	// SettingsSource says where the file layer of Settings came from.
	SettingsSource string
}

// Host is what the development host uses of host.json, defaults filled in.
type Host struct {
	// FunctionTimeout bounds one invocation; 0 means unbounded ("-1").
	FunctionTimeout time.Duration
	// ExecutablePath is customHandler.description.defaultExecutablePath, absolute.
	ExecutablePath   string
	Arguments        []string
	WorkingDirectory string // absolute; the app root when not set
	// EnableForwardingHTTPRequest is customHandler.enableForwardingHttpRequest.
	EnableForwardingHTTPRequest bool
	// RoutePrefix is extensions.http.routePrefix (default "api").
	RoutePrefix string
	ServiceBus  ServiceBus
}

// ServiceBus is extensions.serviceBus, with the Service Bus extension 5.x's defaults.
type ServiceBus struct {
	MaxConcurrentSessions        int           // default 8
	MaxConcurrentCallsPerSession int           // default 1
	SessionIdleTimeout           time.Duration // default: clientRetryOptions.tryTimeout, else 1 min
	MaxAutoLockRenewalDuration   time.Duration // default 5 min; 0 disables renewal
}

// Defaults of host.json values that are absent.
const (
	DefaultFunctionTimeout            = 5 * time.Minute
	DefaultRoutePrefix                = "api"
	DefaultMaxConcurrentSessions      = 8
	DefaultMaxConcurrentCallsPerSess  = 1
	DefaultSessionIdleTimeout         = time.Minute
	DefaultMaxAutoLockRenewalDuration = 5 * time.Minute
)

// Binding types the development host knows.
const (
	TypeServiceBusTrigger = "serviceBusTrigger"
	TypeTimerTrigger      = "timerTrigger"
	TypeHTTPTrigger       = "httpTrigger"
)

// Function is one function folder.
type Function struct {
	// Name is the folder name; non-HTTP invocations are POSTed to /<Name>.
	Name string
	// Path is the function.json file, for messages.
	Path     string
	Bindings []Binding
}

// Binding is one of function.json's bindings, with %NAME% expressions in
// QueueName and Schedule resolved.
type Binding struct {
	Type      string `json:"type"`
	Direction string `json:"direction"`
	Name      string `json:"name"`

	// serviceBusTrigger
	QueueName         string `json:"queueName"`
	Connection        string `json:"connection"`
	IsSessionsEnabled bool   `json:"isSessionsEnabled"`

	// timerTrigger
	Schedule     string `json:"schedule"`
	UseMonitor   *bool  `json:"useMonitor"`
	RunOnStartup bool   `json:"runOnStartup"`

	// httpTrigger
	Methods []string `json:"methods"`
	Route   string   `json:"route"`
}

// Monitor reports whether a timer keeps schedule status (useMonitor, default true).
func (b Binding) Monitor() bool { return b.UseMonitor == nil || *b.UseMonitor }

// Trigger returns the function's trigger binding (direction in, type *Trigger).
func (f Function) Trigger() (Binding, bool) {
	for _, b := range f.Bindings {
		if strings.EqualFold(b.Direction, "in") && strings.HasSuffix(b.Type, "Trigger") {
			return b, true
		}
	}
	return Binding{}, false
}

// LoadOptions tune Load; nil reads settings from the setting files only.
type LoadOptions struct {
	// Env is the process environment (os.Environ form).
	Env []string
	// Overrides win over every other source; "" removes a setting.
	Overrides map[string]string
	// Defaults apply to names no other source sets.
	Defaults map[string]string
}

// Load reads the app at root: its settings (see LoadSettings), host.json and functions.
func Load(root string, o *LoadOptions) (*App, error) {
	if o == nil {
		o = &LoadOptions{}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("%w: app root %s: %v", ErrConfig, root, err)
	}
	settings, source, err := LoadSettings(abs, o.Env, o.Overrides)
	if err != nil {
		return nil, err
	}
	for k, v := range o.Defaults {
		if _, set := settings[k]; !set && v != "" {
			if _, removed := o.Overrides[k]; !removed {
				settings[k] = v
			}
		}
	}
	host, err := LoadHost(abs)
	if err != nil {
		return nil, err
	}
	fns, off, err := loadFunctions(abs, settings)
	if err != nil {
		return nil, err
	}
	return &App{Root: abs, Host: host, Functions: fns, Disabled: off, Settings: settings, SettingsSource: source}, nil
}

// hostFile is what we read of host.json (keys match case-insensitively, as the host's).
type hostFile struct {
	FunctionTimeout *string `json:"functionTimeout"`
	CustomHandler   struct {
		Description struct {
			DefaultExecutablePath string   `json:"defaultExecutablePath"`
			WorkingDirectory      string   `json:"workingDirectory"`
			Arguments             []string `json:"arguments"`
		} `json:"description"`
		EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
	} `json:"customHandler"`
	Extensions struct {
		HTTP struct {
			RoutePrefix *string `json:"routePrefix"`
		} `json:"http"`
		ServiceBus struct {
			MaxConcurrentSessions        *int    `json:"maxConcurrentSessions"`
			MaxConcurrentCallsPerSession *int    `json:"maxConcurrentCallsPerSession"`
			SessionIdleTimeout           *string `json:"sessionIdleTimeout"`
			MaxAutoLockRenewalDuration   *string `json:"maxAutoLockRenewalDuration"`
			ClientRetryOptions           struct {
				TryTimeout *string `json:"tryTimeout"`
			} `json:"clientRetryOptions"`
		} `json:"serviceBus"`
	} `json:"extensions"`
}

// LoadHost reads root/host.json.
func LoadHost(root string) (Host, error) {
	path := filepath.Join(root, "host.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return Host{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var f hostFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Host{}, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	bad := func(key, val string, err error) error {
		return fmt.Errorf("%w: %s: %s %q: %v", ErrConfig, path, key, val, err)
	}
	h := Host{
		FunctionTimeout:             DefaultFunctionTimeout,
		Arguments:                   f.CustomHandler.Description.Arguments,
		EnableForwardingHTTPRequest: f.CustomHandler.EnableForwardingHTTPRequest,
		RoutePrefix:                 DefaultRoutePrefix,
		ServiceBus: ServiceBus{
			MaxConcurrentSessions:        DefaultMaxConcurrentSessions,
			MaxConcurrentCallsPerSession: DefaultMaxConcurrentCallsPerSess,
			SessionIdleTimeout:           DefaultSessionIdleTimeout,
			MaxAutoLockRenewalDuration:   DefaultMaxAutoLockRenewalDuration,
		},
	}
	if v := f.FunctionTimeout; v != nil {
		if strings.TrimSpace(*v) == "-1" {
			h.FunctionTimeout = 0
		} else if d, err := ParseTimeSpan(*v); err != nil || d <= 0 {
			return Host{}, bad("functionTimeout", *v, orPositive(err))
		} else {
			h.FunctionTimeout = d
		}
	}
	exe := f.CustomHandler.Description.DefaultExecutablePath
	if exe == "" {
		return Host{}, fmt.Errorf("%w: %s: customHandler.description.defaultExecutablePath is not set", ErrConfig, path)
	}
	h.ExecutablePath = absUnder(root, exe)
	h.WorkingDirectory = root
	if wd := f.CustomHandler.Description.WorkingDirectory; wd != "" {
		h.WorkingDirectory = absUnder(root, wd)
	}
	if p := f.Extensions.HTTP.RoutePrefix; p != nil {
		h.RoutePrefix = strings.Trim(*p, "/")
	}
	sb := f.Extensions.ServiceBus
	for _, n := range []struct {
		key string
		src *int
		dst *int
	}{
		{"extensions.serviceBus.maxConcurrentSessions", sb.MaxConcurrentSessions, &h.ServiceBus.MaxConcurrentSessions},
		{"extensions.serviceBus.maxConcurrentCallsPerSession", sb.MaxConcurrentCallsPerSession, &h.ServiceBus.MaxConcurrentCallsPerSession},
	} {
		if n.src == nil {
			continue
		}
		if *n.src < 1 {
			return Host{}, bad(n.key, strconv.Itoa(*n.src), errors.New("want at least 1"))
		}
		*n.dst = *n.src
	}
	for _, n := range []struct {
		key    string
		src    *string
		dst    *time.Duration
		zeroOK bool
	}{
		{"clientRetryOptions.tryTimeout", sb.ClientRetryOptions.TryTimeout, &h.ServiceBus.SessionIdleTimeout, false},
		{"sessionIdleTimeout", sb.SessionIdleTimeout, &h.ServiceBus.SessionIdleTimeout, false},
		{"maxAutoLockRenewalDuration", sb.MaxAutoLockRenewalDuration, &h.ServiceBus.MaxAutoLockRenewalDuration, true},
	} {
		if n.src == nil {
			continue
		}
		d, err := ParseTimeSpan(*n.src)
		if err != nil || d < 0 || (d == 0 && !n.zeroOK) {
			return Host{}, bad("extensions.serviceBus."+n.key, *n.src, orPositive(err))
		}
		*n.dst = d
	}
	return h, nil
}

func orPositive(err error) error {
	if err != nil {
		return err
	}
	return errors.New("must be positive")
}

func absUnder(root, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(root, filepath.FromSlash(p))
}

// timeSpan is .NET TimeSpan text: [-]days, or [-][d.]hh:mm[:ss[.fffffff]].
var timeSpan = regexp.MustCompile(`^(-?)(?:(\d+)|(?:(\d+)\.)?(\d+):(\d+)(?::(\d+)(?:\.(\d{1,7}))?)?)$`)

// ParseTimeSpan parses .NET TimeSpan text as host.json uses it:
// `[d.]hh:mm[:ss[.fffffff]]`, or a whole number of days.
func ParseTimeSpan(s string) (time.Duration, error) {
	bad := errors.New("not a TimeSpan like 00:05:00 or 1.02:03:04.5")
	m := timeSpan.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, bad
	}
	var d time.Duration
	for i, f := range []struct {
		unit time.Duration
		max  int64
	}{{24 * time.Hour, math.MaxInt32}, {24 * time.Hour, math.MaxInt32}, {time.Hour, 23}, {time.Minute, 59}, {time.Second, 59}} {
		n, err := strconv.ParseInt(cmp.Or(m[i+2], "0"), 10, 64)
		if err != nil || n > f.max {
			return 0, bad
		}
		d += time.Duration(n) * f.unit
	}
	if frac := m[7]; frac != "" {
		ticks, _ := strconv.ParseInt(frac+strings.Repeat("0", 7-len(frac)), 10, 64)
		d += time.Duration(ticks) * 100 // ticks of 100 ns
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

// functionsDir is root/functions when it exists (this repository), else root (deployed).
func functionsDir(root string) string {
	dir := filepath.Join(root, "functions")
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	return root
}

// DisabledFunction is a function left out, By an app setting or "function.json".
type DisabledFunction struct {
	Name, By string
	Bindings []Binding
}

// loadFunctions reads every function.json and leaves out disabled functions.
func loadFunctions(root string, settings Settings) ([]Function, []DisabledFunction, error) {
	dir := functionsDir(root)
	paths, err := filepath.Glob(filepath.Join(dir, "*", "function.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	sort.Strings(paths)
	var fns []Function
	var off []DisabledFunction
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		var f struct {
			Disabled json.RawMessage `json:"disabled"`
			Bindings []Binding       `json:"bindings"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrConfig, rel(root, path), err)
		}
		name := filepath.Base(filepath.Dir(path))
		if by, ok := disabled(f.Disabled, settings, name); ok {
			off = append(off, DisabledFunction{Name: name, By: by, Bindings: f.Bindings})
			continue
		}
		fn := Function{Name: name, Path: rel(root, path), Bindings: f.Bindings}
		for i := range fn.Bindings {
			b := &fn.Bindings[i]
			for _, field := range []struct {
				key string
				val *string
			}{{"queueName", &b.QueueName}, {"schedule", &b.Schedule}} {
				v, err := settings.Resolve(*field.val)
				if err != nil {
					return nil, nil, fmt.Errorf("%w: %s: binding %q: %s: %w", ErrConfig, fn.Path, b.Name, field.key, err)
				}
				*field.val = v
			}
		}
		fns = append(fns, fn)
	}
	return fns, off, nil
}

func disabled(raw json.RawMessage, settings Settings, name string) (by string, ok bool) {
	if setting, ok := DisabledBy(settings, name); ok {
		return setting, true
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return "function.json", b
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v, ok := settings[s]; ok {
			return s, strings.EqualFold(v, "true")
		}
		return "function.json", strings.EqualFold(s, "true")
	}
	return "", false
}

// DisabledBy reports whether the host's kill switch, AzureWebJobs.<fn>.Disabled
// or AzureWebJobs_<fn>_Disabled set to "1" or "true" (names and values in any
// case), disables fn, and which setting did (azure-webjobs-sdk,
// src/Microsoft.Azure.WebJobs.Host/Listeners/HostListenerFactory.cs,
// IsDisabled, with IConfigurationExtensions.IsSettingEnabled).
func DisabledBy(settings Settings, fn string) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		if strings.EqualFold(k, "AzureWebJobs."+fn+".Disabled") || strings.EqualFold(k, "AzureWebJobs_"+fn+"_Disabled") {
			if v := strings.TrimSpace(settings[k]); v == "1" || strings.EqualFold(v, "true") {
				return k, true
			}
		}
	}
	return "", false
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

// Settings are app settings by name (case-sensitive here).
type Settings map[string]string

// ErrUnresolved is wrapped when a %NAME% expression names an unset setting.
var ErrUnresolved = errors.New("setting is not set")

var expr = regexp.MustCompile(`%([^%]+)%`)

// Resolve replaces every %NAME% in v with setting NAME; unset or "" wraps ErrUnresolved.
func (s Settings) Resolve(v string) (string, error) {
	var missing []string
	out := expr.ReplaceAllStringFunc(v, func(m string) string {
		name := m[1 : len(m)-1]
		val, ok := s[name]
		if !ok || val == "" {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%%%s%%: %w (set %s in local.settings.json or the environment)", missing[0], ErrUnresolved, missing[0])
	}
	return out, nil
}

// Environ returns the settings as KEY=value lines, sorted.
func (s Settings) Environ() []string {
	out := make([]string, 0, len(s))
	for k, v := range s {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Setting-file names, in the order LoadSettings looks for them.
const (
	LocalSettingsFile    = "local.settings.json"
	LocalSettingsExample = "local.settings.json.template"
)

// LoadSettings merges the app settings as the Core Tools do: the Values of
// root/local.settings.json (else of local.settings.json.template), then the
// environment's non-empty values, then overrides ("" removes one). Empty
// settings are dropped; the source names the file used, or "environment".
func LoadSettings(root string, env []string, overrides map[string]string) (Settings, string, error) {
	s := Settings{}
	source := "environment"
	for _, name := range []string{LocalSettingsFile, LocalSettingsExample} {
		path := filepath.Join(root, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrConfig, err)
		}
		var f struct {
			Values map[string]any `json:"Values"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, "", fmt.Errorf("%w: %s: %v", ErrConfig, name, err)
		}
		for k, v := range f.Values {
			switch v := v.(type) {
			case string:
				s[k] = v
			case nil:
			default:
				// Numbers and booleans become their JSON text, as the Core Tools read them.
				b, _ := json.Marshal(v)
				s[k] = string(b)
			}
		}
		source = name
		break
	}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" && v != "" {
			s[k] = v
		}
	}
	maps.Copy(s, overrides)
	maps.DeleteFunc(s, func(_, v string) bool { return v == "" })
	return s, source, nil
}
