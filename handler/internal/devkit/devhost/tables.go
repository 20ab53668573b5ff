package devhost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	hcfg "github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// tableCreateTimeout bounds each create of a table the product reads.
const tableCreateTimeout = 10 * time.Second

// StoreTables says whether Start created the tables the product reads, with
// the line that names them or says why not. Empty before Start.
func (h *Host) StoreTables() (line string, ok bool) { return h.tablesLine, h.tablesOK }

// ensureTables creates the order and dead-letter tables on a store named by a
// connection string, as infra does on Azure; a service URI's is left as it is.
func (h *Host) ensureTables(ctx context.Context, settings map[string]string) {
	tables := []string{cmp.Or(strings.TrimSpace(settings[hcfg.EnvStoreTable]), hcfg.DefaultTable), h.deadLetterTable}
	conn := h.storeConn
	if strings.EqualFold(strings.TrimSuffix(conn, ";"), "UseDevelopmentStorage=true") {
		conn = hcfg.DevelopmentStorage
	}
	if conn == "" {
		h.tablesLine = fmt.Sprintf("the store is named by %s: the development host creates no tables there; %s must exist (infra creates them)",
			SettingStoreServiceURI, strings.Join(tables, " and "))
		return
	}
	// No retries by the SDK: a store that is not there is said at once.
	svc, err := aztables.NewServiceClientFromConnectionString(conn,
		&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		h.tablesLine = fmt.Sprintf("tables %s not created: %s: %s", strings.Join(tables, " and "), SettingStoreConnection, tableerr.Redact(err))
		return
	}
	var done, failed []string
	for _, name := range tables {
		cctx, cancel := context.WithTimeout(ctx, tableCreateTimeout)
		_, err := svc.NewClient(name).CreateTable(cctx, nil)
		cancel()
		var re *azcore.ResponseError
		switch {
		case err == nil:
			done = append(done, name+" created")
		case errors.As(err, &re) && re.StatusCode == http.StatusConflict && re.ErrorCode == string(aztables.TableAlreadyExists):
			done = append(done, name+" already there")
		case errors.As(err, &re):
			failed = append(failed, fmt.Sprintf("%s (%d %s)", name, re.StatusCode, re.ErrorCode))
		default:
			failed = append(failed, fmt.Sprintf("%s (%s)", name, tableerr.Redact(err)))
		}
	}
	if len(failed) > 0 {
		what, until := "table", "it exists"
		if len(failed) > 1 {
			what, until = "tables", "they exist"
		}
		h.tablesLine = fmt.Sprintf("could not create %s %s on the store; the functions fail transiently until %s",
			what, strings.Join(failed, ", "), until)
		return
	}
	h.tablesLine, h.tablesOK = "tables: "+strings.Join(done, ", "), true
}
