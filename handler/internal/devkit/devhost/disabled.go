package devhost

import "github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"

// DisabledFunctions returns the functions the app leaves out, as the
// Functions host does, with what disabled each: the kill switch, an app
// setting AzureWebJobs.<name>.Disabled (or AzureWebJobs_<name>_Disabled)
// of "true" or "1" (funcapp.DisabledBy), or function.json's "disabled".
// The host never invokes them: a disabled Service Bus trigger's queue
// still takes messages, which wait there.
func (h *Host) DisabledFunctions() []funcapp.DisabledFunction {
	return append([]funcapp.DisabledFunction(nil), h.app.Disabled...)
}
