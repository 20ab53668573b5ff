// Command handler is the orderstatus Azure Functions custom handler `azd up` deploys.
//
//	handler [serve]   serve the functions for the Functions host (default)
//	handler version   print the version
//
// Serving reads its settings from the environment (docs/configuration.md), listens on
// 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT, and on SIGTERM finishes in-flight calls and
// exits 0. The operators' tools are separate binaries (README, "Layout").
package main

import (
	"os"

	"github.com/orderstatus/orderstatus/handler/internal/app"
)

// version and revision are set by -ldflags "-X main.version=... -X main.revision=...".
var (
	version  = "dev"
	revision = ""
)

func program() app.Program {
	build := app.NewBuild(version, revision)
	return app.Program{
		Name:    "handler",
		About:   "The orderstatus custom handler, as Azure runs it. With no command it serves (the Functions host starts it so).",
		Default: "serve",
		Commands: []app.Command{
			app.Serve(app.ServeOptions{Program: "handler", Build: build, OpenBroker: app.ServiceBus}),
			app.Version("handler", build),
		},
	}
}

func main() { os.Exit(program().Main(os.Args[1:], os.Stdout, os.Stderr)) }
