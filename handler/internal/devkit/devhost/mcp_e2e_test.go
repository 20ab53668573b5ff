package devhost

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orderstatus/orderstatus/handler/internal/cli/deadletters"
)

// mcpSession runs `deadletters mcp args...` in process against d, as the CLI
// connects (the development host's file in d.app), and returns the SDK's
// client session on its stdin and stdout.
func (d *cliHost) mcpSession(args ...string) *mcp.ClientSession {
	d.t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	getenv := func(k string) string {
		switch k {
		case "DEAD_LETTER_TABLE":
			return d.dlTable
		case "OrderStore__tableName":
			return d.orderTable
		}
		return ""
	}
	go func() {
		done <- deadletters.Run(d.ctx, append([]string{"mcp"}, args...), outW, &stderr,
			deadletters.Env{Dir: d.app, Getenv: getenv, Stdin: inR})
		_ = outW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "devhost-e2e", Version: "1"}, nil).
		Connect(d.ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		d.t.Fatalf("connect: %v", err)
	}
	d.t.Cleanup(func() {
		_ = cs.Close()
		_ = inW.Close()
		if code := <-done; code != 0 {
			d.t.Errorf("deadletters mcp exited %d: %s", code, stderr.String())
		}
	})
	return cs
}

// mcpCall calls tool and returns its structured content as JSON.
func (d *cliHost) mcpCall(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	d.t.Helper()
	res, err := cs.CallTool(d.ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		d.t.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		d.t.Fatalf("%s %v: %+v", tool, args, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		d.t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		d.t.Fatalf("%s: %s: %v", tool, b, err)
	}
	return out
}

// normal is v through JSON, so that a tool's value and a CLI line compare.
func normal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// Every read tool of `deadletters mcp` against the real handler in the
// development host answers what the CLI's --json does on the same store:
// stats, groups, list, find_order (as find --order) and show; without
// --allow-write no write tool is listed.
func TestMCPReadToolsAgainstTheDevHost(t *testing.T) {
	t.Parallel()
	d := newCLIHost(t)
	d.invalidTransitions("m-0", "m-1")
	d.send(ScenarioLine{Subject: "OrderStatusChanged", SessionID: "m-2", MessageID: "m-2:1", Body: []byte("not json")})
	d.must("sweep")

	cs := d.mcpSession()
	tools, err := cs.ListTools(d.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"find_order", "groups", "list", "show", "stats"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	// Ages and the closing figures differ by when each ran; compare the rest.
	strip := func(lines []map[string]any) []map[string]any {
		for _, l := range lines {
			delete(l, "age_seconds")
			delete(l, "oldest_age_seconds")
			if e, ok := l["entry"].(map[string]any); ok {
				delete(e, "age_seconds")
			}
		}
		return lines
	}
	asLines := func(v any) []map[string]any {
		var out []map[string]any
		if err := json.Unmarshal([]byte(normal(t, v)), &out); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		return strip(out)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		key  string
		cli  []string
	}{
		{"stats", nil, "stats", []string{"stats", "--json"}},
		{"groups", nil, "groups", []string{"groups", "--json"}},
		{"list", map[string]any{"state": "open,left,archived"}, "entries", []string{"list", "--json", "--state", "open,left,archived"}},
		{"find_order", map[string]any{"order_id": "m-1"}, "events", []string{"find", "--order", "m-1", "--json"}},
	} {
		got := asLines(d.mcpCall(cs, tc.tool, tc.args)[tc.key])
		want := strip(d.must(tc.cli...).lines(t))
		if len(got) == 0 || normal(t, got) != normal(t, want) {
			t.Errorf("%s %v:\n got %s\nwant %s (%q)", tc.tool, tc.args, normal(t, got), normal(t, want), tc.cli)
		}
	}

	entries := d.entries()
	e, ok := entries["m-2:1:parked"]
	if !ok {
		t.Fatalf("no entry for the parked m-2:1 in %v", entries)
	}
	shown := d.mcpCall(cs, "show", map[string]any{"id": e["id"]})
	if shown["id"] != e["id"] || shown["body"] != "not json" || shown["reason"] != "InvalidPayload" {
		t.Errorf("show %s: %v", e["id"], shown)
	}
	if props, _ := shown["properties"].(map[string]any); props["DeadLetterReason"] != "InvalidPayload" {
		t.Errorf("show %s: properties %v, want the parked copy's", e["id"], shown["properties"])
	}
}
