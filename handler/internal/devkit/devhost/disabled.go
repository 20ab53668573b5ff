package devhost

import "github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"

// DisabledFunctions returns the functions the app leaves out, as the Functions
// host does, with what disabled each (see funcapp.DisabledBy).
func (h *Host) DisabledFunctions() []funcapp.DisabledFunction {
	return append([]funcapp.DisabledFunction(nil), h.app.Disabled...)
}
