package outbox_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocSnippetsAreTheExample: the Go code docs/publishing.md and
// docs/outbox.md show is lines of ExampleTable_Commit, which compiles, so
// the pages cannot drift from the API; so is any the README shows (it
// links docs/outbox.md for the example, with the go get line).
func TestDocSnippetsAreTheExample(t *testing.T) {
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(ex), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for page, must := range map[string]bool{"../../../README.md": false, "../../../docs/publishing.md": true, "../../../docs/outbox.md": true} {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		found := false
		for _, block := range strings.Split(text, "```go\n")[1:] {
			block = block[:strings.Index(block, "```")]
			if !strings.Contains(block, "outbox.NewTable") {
				continue
			}
			found = true
			for _, l := range strings.Split(block, "\n") {
				if l = strings.TrimSpace(l); l != "" && !lines[l] {
					t.Errorf("%s shows %q, which is not a line of ExampleTable_Commit", page, l)
				}
			}
		}
		if !found && must {
			t.Errorf("%s shows no outbox.NewTable example", page)
		}
	}
}

// TestReadmeGoGet: the README's producer section gives the go get line
// of this package's import path (the one the example imports).
func TestReadmeGoGet(t *testing.T) {
	const path = "github.com/orderstatus/orderstatus/handler/publish/outbox"
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ex), `"`+path+`"`) {
		t.Fatalf("example_test.go does not import %s; update this test", path)
	}
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "go get "+path+"\n") {
		t.Errorf("README.md has no line `go get %s`", path)
	}
}
