// Package lint holds tests that guard the validator's shape rather than its
// behaviour, in the spirit of Pebble's lint tests.
package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// module is the validator's module path.
const module = "github.com/contentledger/contentledger/services/validator"

// levels places every package of the module. A package may import only
// packages of a lower level, so the direction reads from the top down:
//
//	cmd → app → api → pipeline → consensus → state → storage
//
// with the parts beside that chain (events, eventpub, opsevents, payments,
// segments, ...) at the level of what they use, and nothing importing app
// but cmd. A new package fails this test until it is placed here, which is
// the moment to decide where it belongs.
var levels = map[string]int{
	"cmd/validator": 9,
	"app":           8,

	"internal/api":      7,
	"internal/metrics":  6, // reads the pipeline's, raft's, the database's and the event streams' figures
	"internal/pipeline": 5,

	"internal/consensus/cluster": 4, // membership and leadership, over raft, state and the transport
	"internal/consensus":         3,
	"internal/segments":          3, // what the segment store holds: reads applied state

	"internal/state":     2,
	"internal/opsevents": 2, // watches the transport's and the database's counters
	"internal/settings":  2,

	"internal/storage":     1,
	"internal/transport":   1,
	"internal/events":      1,
	"internal/eventpub":    1,
	"internal/payments":    1,
	"internal/epoch":       1,
	"internal/blobgateway": 1,
	"internal/headreport":  1, // followers' head reports: pkg/api only
	"internal/sysinfo":     1,
	"internal/ui":          1,
	"internal/chat":        1, // the operator assistant: reads routes through an interface internal/api implements

	"internal/rate":   0, // a leaf: measures and bounds rates for any package
	"internal/access": 0, // a leaf: which token opens which lane
	"internal/lint":   0, // tests only
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	TestImports,
	XTestImports []string
}

// workspace lists every package of the workspace once for all the tests
// of this package (go list takes about a second).
var workspace = sync.OnceValues(func() ([]pkg, error) {
	out, err := exec.Command("go", "list", "-json", "github.com/contentledger/contentledger/...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
})

// packages returns the workspace's packages, failing t when they cannot be
// listed.
func packages(t *testing.T) []pkg {
	t.Helper()
	pkgs, err := workspace()
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestImportDirection fails when a package of the validator imports one of
// its own level or above, or is not placed in levels.
func TestImportDirection(t *testing.T) {
	var seen []string
	for _, p := range packages(t) {
		if p.ImportPath != module && !strings.HasPrefix(p.ImportPath, module+"/") {
			continue // another module of the workspace
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen = append(seen, name)
		level, placed := levels[name]
		if !placed {
			t.Errorf("package %s is not placed in the import levels of internal/lint", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if depLevel, placed := levels[dep]; placed && depLevel >= level {
				t.Errorf("%s (level %d) imports %s (level %d): imports go down only", name, level, dep, depLevel)
			}
		}
	}
	// A level for a package that no longer exists hides nothing, but it
	// misleads the reader.
	for name := range levels {
		if !slices.Contains(seen, name) {
			t.Errorf("levels places %s, which is not a package of the module", name)
		}
	}
}

// appImporters are the only packages that may import app: the command,
// the two programs that run validators in-process through app.Run (the
// local network and the system tests' harness), as etcd's embed package is
// used, and the compose file's test, which loads the validator's settings
// with app.LoadConfig as the command does.
var appImporters = []string{
	module + "/cmd/validator",
	"github.com/contentledger/contentledger/tools/devnet",
	"github.com/contentledger/contentledger/tests/harness",
	"github.com/contentledger/contentledger/tests/compose",
}

// TestNothingImportsApp: app is the wiring; no package of the workspace
// imports it, tests included, but appImporters.
func TestNothingImportsApp(t *testing.T) {
	for _, p := range packages(t) {
		if slices.Contains(appImporters, p.ImportPath) || p.ImportPath == module+"/app" {
			continue
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if imp == module+"/app" {
				t.Errorf("%s imports app", p.ImportPath)
			}
		}
	}
}
