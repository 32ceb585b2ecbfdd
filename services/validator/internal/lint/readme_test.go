package lint

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeListsEveryPackage holds the README's repository map to the
// workspace: every package of every module is named there, under its
// module. An indented line names packages of the module above it: the
// first word is a path in the module, the words after it up to the
// description siblings in the same directory. A module line without
// indented lines below it names its packages in its description.
func TestReadmeListsEveryPackage(t *testing.T) {
	root := workspaceRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := readmePackages(t, readme)
	for _, p := range packages(t) {
		rel := strings.TrimPrefix(p.ImportPath, "github.com/contentledger/contentledger/")
		if !listed(rel) {
			t.Errorf("README.md's repository map does not name package %s", rel)
		}
	}
}

// readmePackages parses the repository map (the code block after "##
// Repository") and returns whether it names the package at rel, a path
// from the workspace root.
func readmePackages(t *testing.T, readme []byte) func(rel string) bool {
	_, block, ok := bytes.Cut(readme, []byte("## Repository"))
	if !ok {
		t.Fatal("README.md has no ## Repository section")
	}
	_, block, _ = bytes.Cut(block, []byte("```\n"))
	block, _, _ = bytes.Cut(block, []byte("```"))
	names := map[string]bool{}    // module/path of each package named on an indented line
	inline := map[string]string{} // module -> its line, for a module line without indented lines
	word := regexp.MustCompile(`[a-z][a-z0-9-]*`)
	var module string
	sc := bufio.NewScanner(bytes.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "  ") {
			module, _, _ = strings.Cut(line, " ")
			module = strings.TrimSuffix(module, "/")
			inline[module] = line
			continue
		}
		delete(inline, module)
		// The names end where the description starts: two spaces.
		list, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		fields := strings.Fields(list)
		dir := path.Dir(fields[0])
		names[path.Join(module, fields[0])] = true
		for _, f := range fields[1:] {
			names[path.Join(module, dir, f)] = true
		}
	}
	return func(rel string) bool {
		if names[rel] {
			return true
		}
		for module, line := range inline {
			if rest, ok := strings.CutPrefix(rel, module+"/"); ok {
				for _, w := range word.FindAllString(line, -1) {
					if w == rest {
						return true
					}
				}
			}
		}
		return false
	}
}

// workspaceRoot is the directory of the go.work file.
func workspaceRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOWORK: %q %v", out, err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
