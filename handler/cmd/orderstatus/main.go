// Command orderstatus is the operators' and producers' tool, run with the
// operator's own identity (az login), never on the Functions host:
//
//	orderstatus deadletters ...   the runbooks' dead-letter tool
//	orderstatus publish ...       send status changes, schedule and cancel payment timeouts, relay an outbox
//	orderstatus version           print the version
//
// Both reach Azure, or the development host that `make run` started.
package main

import (
	"os"

	"github.com/orderstatus/orderstatus/handler/internal/app"
	"github.com/orderstatus/orderstatus/handler/internal/cli/deadletters"
	publishcli "github.com/orderstatus/orderstatus/handler/internal/cli/publish"
)

var (
	version  = "dev"
	revision = ""
)

func program() app.Program {
	return app.Program{
		Name:  "orderstatus",
		About: "The operators' and producers' tool: dead letters and publishing, against Azure or the development host.",
		Commands: []app.Command{
			{Name: "deadletters", Summary: "the runbooks' dead-letter tool: list, stats, sweep [--dry-run], replay, discard; mcp for an assistant", Run: deadletters.Main},
			{Name: "publish", Summary: "send status changes, schedule and cancel payment timeouts, relay a producer's outbox (the producers' side)", Run: publishcli.Main},
			app.Version("orderstatus", app.NewBuild(version, revision)),
		},
	}
}

func main() { os.Exit(program().Main(os.Args[1:], os.Stdout, os.Stderr)) }
