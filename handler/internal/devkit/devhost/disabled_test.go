package devhost

import (
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
)

// TestKillSwitch: a Service Bus and a timer function disabled by the
// host's app setting are never invoked (the messages wait in the queue);
// the HTTP functions are still served; without the setting, or with
// "false", both are invoked.
func TestKillSwitch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		settings map[string]string
		env      []string
		disabled bool
	}{
		{"disabled in the settings", map[string]string{"AzureWebJobs.OrderStatus.Disabled": "true", "AzureWebJobs.Sweep.Disabled": "1"}, nil, true},
		{"disabled in the environment", nil, []string{"AzureWebJobs_OrderStatus_Disabled=true", "AzureWebJobs_Sweep_Disabled=true"}, true},
		{"enabled again", map[string]string{"AzureWebJobs.OrderStatus.Disabled": "false", "AzureWebJobs.Sweep.Disabled": "false"}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, up := testHost(t, timerApp("0 0 0 1 1 *"), func(o *Options) {
				o.Settings = maps.Clone(o.Settings)
				maps.Copy(o.Settings, tt.settings)
				o.Settings["ServiceBusConnection__fullyQualifiedNamespace"] = "<namespace>.servicebus.windows.net" // the template's
				o.Env = append(o.Env, tt.env...)
			})
			var calls atomic.Int64
			up.set(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				reply(w, http.StatusOK, "Applied")
			})
			ctx := testCtx(t)
			if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
				t.Fatal(err)
			}
			if err := h.FireTimers(ctx); err != nil {
				t.Fatal(err)
			}
			if !tt.disabled {
				if err := h.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
				if n := calls.Load(); n != 2 {
					t.Errorf("%d invocations, want the message's and the timer's", n)
				}
				if got := h.DisabledFunctions(); len(got) != 0 {
					t.Errorf("DisabledFunctions = %+v, want none", got)
				}
				return
			}
			// The disabled trigger's connection is still the dev host's
			// to stand in for: the handler does not get it.
			if v, ok := instanceEnv(t, h, h.pool.first(nil))["ServiceBusConnection__fullyQualifiedNamespace"]; ok {
				t.Errorf("the handler got ServiceBusConnection__fullyQualifiedNamespace=%s", v)
			}
			// No dispatcher takes the queue and no timer is left to fire:
			// nothing can invoke them.
			var names []string
			for _, d := range h.DisabledFunctions() {
				names = append(names, d.Name)
			}
			if !slices.Equal(names, []string{"OrderStatus", "Sweep"}) {
				t.Errorf("DisabledFunctions = %+v, want OrderStatus and Sweep", h.DisabledFunctions())
			}
			if len(h.sessions) != 0 || len(h.timers) != 0 || len(h.TimerFunctions()) != 0 {
				t.Errorf("%d session dispatchers, %d timers, want none", len(h.sessions), len(h.timers))
			}
			if st := h.broker.Stats(h.Queue()); st.Active != 1 {
				t.Errorf("queue %+v, want the message waiting", st)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("%d invocations of disabled functions, want 0", n)
			}
			// The HTTP functions are served.
			resp, err := http.Get("http://" + h.Addr() + "/api/orders/o-1")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := calls.Load(); n != 1 {
				t.Errorf("GET /api/orders/o-1 made %d calls to the handler, want 1", n)
			}
		})
	}
}
