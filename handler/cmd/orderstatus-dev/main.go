// Command orderstatus-dev is the dev kit: the development host and the
// handler it runs on this machine.
//
//	orderstatus-dev dev ...   the whole system here: in-memory Service Bus, Azurite (make run)
//	orderstatus-dev [serve]   the handler, reaching the development host's broker too (the dev host starts it)
//	orderstatus-dev version   print the version
//
// Its serve is the deployed handler's plus the development host's broker.
package main

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/orderstatus/orderstatus/handler/internal/app"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/cpuprofile"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
)

var (
	version  = "dev"
	revision = ""
)

// openBroker is app.ServiceBus, or the development host's broker.
func openBroker(cfg config.Config, cred azcore.TokenCredential) (broker.Broker, error) {
	if cfg.DevBrokerURL != "" {
		return loopback.NewClient(cfg.DevBrokerURL, nil)
	}
	return app.ServiceBus(cfg, cred)
}

// dev is the development host, running this binary's serve by default.
func dev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--handler" || strings.HasPrefix(a, "--handler=") }) {
		if self, err := os.Executable(); err == nil {
			args = append([]string{"--handler", self}, args...)
		}
	}
	return devhost.Main(ctx, args, stdout, stderr)
}

func program() app.Program {
	build := app.NewBuild(version, revision)
	return app.Program{
		Name:    "orderstatus-dev",
		About:   "The dev kit: the development host, and the handler it runs (with no command it serves, as the handler does).",
		Default: "serve",
		Commands: []app.Command{
			{Name: "dev", Summary: "the development host: the whole system on this machine (in-memory Service Bus, Azurite)", Run: dev},
			app.Serve(app.ServeOptions{Program: "orderstatus-dev", Build: build, OpenBroker: openBroker,
				Before: func(getenv func(string) string) (func(), error) { return cpuprofile.Start(getenv(cpuprofile.Env)) }}),
			app.Version("orderstatus-dev", build),
		},
	}
}

func main() { os.Exit(program().Main(os.Args[1:], os.Stdout, os.Stderr)) }
