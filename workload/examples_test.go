package workload

import (
	"path/filepath"
	"testing"
)

// Every job spec file in examples/ is valid: the README points newcomers
// at them, so a field renamed in the parser must be renamed there too.
func TestExampleSpecsParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d example specs in ../examples, want at least 5", len(files))
	}
	for _, f := range files {
		specs, err := LoadSpecs(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(specs) == 0 {
			t.Errorf("%s: no jobs", f)
		}
	}
}
