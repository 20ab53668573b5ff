package main

// The pointers the sources, help texts and pages give a reader resolve:
// a README section named in prose is a heading of the README, a docs page
// named by its path exists (and so does the heading its #fragment names),
// and every relative link of a Markdown page leads somewhere. A section
// moved to docs/ cannot leave a pointer to where it used to be.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refFile is one text file of the repository a reader may follow a
// pointer from.
type refFile struct {
	rel  string // from the repository root, with slashes
	text string
}

// refFiles returns the repository's sources, help texts, pages, infra and
// scripts (not the installed tools, the build output or .run).
func refFiles(t *testing.T) []refFile {
	t.Helper()
	skipDir := map[string]bool{".git": true, "node_modules": true, ".run": true, "bin": true, "dist": true, "tools": true}
	exts := []string{".go", ".md", ".bicep", ".bicepparam", ".yml", ".yaml", ".sh", ".mjs", ".js", ".json", ".template"}
	var out []refFile
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != ".." && skipDir[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "Makefile" && !slices.Contains(exts, filepath.Ext(p)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel("..", p)
		if err != nil {
			return err
		}
		out = append(out, refFile{rel: filepath.ToSlash(rel), text: string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d files to check; the walk from the repository root went wrong", len(out))
	}
	return out
}

var (
	headingLine = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	// slugDrop is what GitHub drops from a heading to make its anchor.
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// headings returns the headings of a Markdown text (code blocks left
// out) and their anchors as GitHub makes them ("## Deploy to Azure":
// #deploy-to-azure; a repeated one gets -1, -2, ...).
func headings(md string) (titles []string, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		m := headingLine.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		title := m[1]
		titles = append(titles, strings.ReplaceAll(title, "`", ""))
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return titles, anchors
}

// readmeSectionRef finds a README section named in prose: a quoted title,
// or capitalised words, after "README", "README's" or "README,".
var readmeSectionRef = regexp.MustCompile(`\bREADME(?:'s)?,? (?:"([^"]+)"|([A-Z][A-Za-z0-9-]*(?: [A-Z][A-Za-z0-9-]*)*))`)

// TestReadmeSectionPointersResolve: every README section named in the
// sources, help texts and pages is a heading of the README (the title, or
// the start of it), so a section moved to docs/ cannot stay pointed at.
func TestReadmeSectionPointersResolve(t *testing.T) {
	titles, _ := headings(readme(t))
	found := 0
	for _, f := range refFiles(t) {
		for _, m := range readmeSectionRef.FindAllStringSubmatch(f.text, -1) {
			name := m[1] + m[2]
			found++
			ok := slices.ContainsFunc(titles, func(h string) bool { return h == name || strings.HasPrefix(h, name+" ") })
			if !ok {
				t.Errorf("%s: %q points to the README section %q, which the README has not (its headings: %q)", f.rel, m[0], name, titles)
			}
		}
	}
	if found == 0 {
		t.Error("no README section pointer found anywhere; the pattern went wrong")
	}
}

// docsPageRef finds a docs page named by its path from the root, with its
// #fragment if any: docs/outages.md, ../../docs/outages.md#why-the-handler-reschedules.
var docsPageRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:\.\./)*docs/[a-z0-9_-]+\.md)(#[A-Za-z0-9_-]+)?`)

// mdLink finds a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsPagePointersResolve: every docs page a source, help text or page
// names exists, every relative link of a Markdown page leads to a file,
// and a #fragment on a Markdown page is one of its headings.
func TestDocsPagePointersResolve(t *testing.T) {
	files := refFiles(t)
	byRel := map[string]string{}
	for _, f := range files {
		byRel[f.rel] = f.text
	}
	anchorsOf := map[string]map[string]bool{}
	check := func(from, target, frag, ref string) {
		text, ok := byRel[target]
		if !ok {
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(target))); err != nil {
				t.Errorf("%s: %q names %s, which does not exist", from, ref, target)
				return
			}
		}
		if frag == "" || !strings.HasSuffix(target, ".md") {
			return
		}
		if anchorsOf[target] == nil {
			_, anchorsOf[target] = headings(text)
		}
		if !anchorsOf[target][strings.TrimPrefix(frag, "#")] {
			t.Errorf("%s: %q: %s has no heading with the anchor %s", from, ref, target, frag)
		}
	}
	pages := 0
	for _, f := range files {
		for _, m := range docsPageRef.FindAllStringSubmatch(f.text, -1) {
			pages++
			check(f.rel, strings.TrimLeft(strings.ReplaceAll(m[1], "../", ""), "/"), m[2], m[1]+m[2])
		}
		if !strings.HasSuffix(f.rel, ".md") {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(f.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			if path == "" {
				check(f.rel, f.rel, "#"+frag, target) // within the page
				continue
			}
			rel := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f.rel), path)))
			if frag != "" {
				frag = "#" + frag
			}
			check(f.rel, rel, frag, target)
		}
	}
	if pages == 0 {
		t.Error("no docs page pointer found anywhere; the pattern went wrong")
	}
}
