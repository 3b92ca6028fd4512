package boards

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// docs/boards.md is what users read to set their terminal: every supported
// board must have its row there, with the console rate the code uses.
func TestDocsListEveryBoard(t *testing.T) {
	doc, err := os.ReadFile("../docs/boards.md")
	if err != nil {
		t.Fatalf("read the user documentation: %v", err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if end := strings.Index(name, "`"); end > 0 {
				rows[name[:end]] = line
			}
		}
	}
	for _, b := range All() {
		if b.Unsupported != "" {
			if !strings.Contains(string(doc), b.Name+" is not supported") {
				t.Errorf("docs/boards.md does not explain why %s is not supported", b.Name)
			}
			continue
		}
		row, ok := rows[b.Name]
		if !ok {
			t.Errorf("docs/boards.md has no table row for board %s", b.Name)
			continue
		}
		if baud := strconv.Itoa(b.Console.Baud); !strings.Contains(row, baud) {
			t.Errorf("docs/boards.md row for %s does not give its console rate %s: %s", b.Name, baud, row)
		}
		for _, alias := range b.Aliases {
			// Ranges such as alix2c0…alix2c3 cover the aliases between.
			if !strings.Contains(row, alias) && !strings.Contains(row, "…") {
				t.Errorf("docs/boards.md row for %s does not list alias %s", b.Name, alias)
			}
		}
	}
}
