package app

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/settings"
)

// TestSettingsAreClassified holds settingClass to Config: every setting has
// a component and a risk, so none is missing from the configuration views.
func TestSettingsAreClassified(t *testing.T) {
	fields := 0
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		if ct.Field(i).Tag.Get("envconfig") != "" {
			fields++
		}
	}
	got := describeSettings(Config{})
	if len(got) != fields || fields == 0 {
		t.Fatalf("%d settings of %d Config fields", len(got), fields)
	}
	for _, s := range got {
		if s.Component == "" || s.Risk == "" || s.Description == "" {
			t.Errorf("%s: component %q, risk %q, description %q", s.Key, s.Component, s.Risk, s.Description)
		}
		if !s.DefaultParses() {
			t.Errorf("%s: default %q does not parse as %s", s.Key, s.Default, s.Type)
		}
	}
}

func TestConfigRoutes(t *testing.T) {
	t.Setenv(configPrefix+"MAX_BATCH", "64")      // what the test's Config sets: from the environment
	t.Setenv(configPrefix+"MAX_PENDING", "12345") // not what it sets: the caller's value wins
	base := startMockWith(t, func(c *Config) { c.AuthToken, c.NoSync = "s3cret", false })
	get := func(path string, out any) {
		t.Helper()
		var e apierror.Body
		if code := request(t, http.MethodGet, base+path, nil, &e); code != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d", path, code)
		}
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
	}

	var values api.ConfigValues
	get("/v1/config/osgi", &values)
	if values.ContractVersion != api.ConfigValuesVersion || values.ReloadMode != "restart" ||
		values.Components["pipeline"][configPrefix+"MAX_BATCH"] != float64(64) ||
		values.Components["node"][configPrefix+"MODE"] != "MOCK" || values.Components["api"][configPrefix+"AUTH_TOKEN"] != settings.Redacted ||
		values.Components["pipeline"][configPrefix+"EPOCH_LENGTH"] != "6m24s" {
		t.Fatalf("values %+v", values)
	}

	var schema api.ConfigSchema
	get("/v1/config/osgi/schema", &schema)
	entries := map[string]api.ConfigEntry{}
	for _, e := range schema.Entries {
		entries[e.Key] = e
	}
	if len(entries) != len(describeSettings(Config{})) || schema.ContractVersion != api.ConfigSchemaVersion {
		t.Fatalf("schema of %d entries", len(entries))
	}
	if e := entries[configPrefix+"MODE"]; len(e.Enum) != 3 || e.Risk != "high" || e.ReloadMode != "restart" || e.Default != "" {
		t.Fatalf("MODE %+v", e)
	}
	if e := entries[configPrefix+"PAYMENT_WAIT"]; e.Type != "duration" || e.Default != "15s" || e.Description == "" || e.Component != "chain" {
		t.Fatalf("PAYMENT_WAIT %+v", e)
	}
	if e := entries[configPrefix+"AUTH_TOKEN"]; e.Type != "secret" || !e.Secret {
		t.Fatalf("AUTH_TOKEN %+v", e)
	}

	var sources api.ConfigSources
	get("/v1/config/osgi/sources", &sources)
	src := map[string]api.ConfigSource{}
	for _, s := range sources.Sources {
		src[s.Key] = s
	}
	for key, want := range map[string]api.ConfigSource{
		configPrefix + "MAX_BATCH":   {Source: "env", EnvSet: true},
		configPrefix + "MAX_PENDING": {Source: "caller", EnvSet: true},
		configPrefix + "CLUSTER_ID":  {Source: "caller"},
		configPrefix + "NO_SYNC":     {Source: "default"},
	} {
		if got := src[key]; got.Source != want.Source || got.EnvSet != want.EnvSet {
			t.Errorf("%s: %+v, want %+v", key, got, want)
		}
	}
	if len(sources.Gaps) != 1 || sources.Gaps[0].Field != "file" {
		t.Fatalf("sources gaps %+v", sources.Gaps)
	}

	var delta api.ConfigDelta
	get("/v1/config/osgi/delta", &delta)
	changed := map[string]api.ConfigChange{}
	for _, c := range delta.Changed {
		changed[c.Key] = c
	}
	if c := changed[configPrefix+"CLUSTER_ID"]; c.Current != "test" || c.Default != "contentledger-local" || c.Source != "caller" {
		t.Fatalf("CLUSTER_ID %+v", c)
	}
	if c := changed[configPrefix+"PAYMENT_WAIT"]; c.Current != "1s" || c.Default != "15s" {
		t.Fatalf("PAYMENT_WAIT %+v", c)
	}
	if c, ok := changed[configPrefix+"AUTH_TOKEN"]; !ok || c.Current != settings.Redacted {
		t.Fatalf("AUTH_TOKEN %+v", c)
	}
	if _, ok := changed[configPrefix+"NO_SYNC"]; ok {
		t.Fatal("NO_SYNC is its default and listed as changed")
	}

	var cov api.ConfigCoverage
	get("/v1/config/osgi/coverage", &cov)
	if cov.ContractVersion != api.ConfigCoverageVersion || cov.Settings != len(entries) || len(cov.Tunables) == 0 ||
		cov.Configurable+cov.Fixed+cov.NotImplemented != len(cov.Tunables) || len(cov.Gaps) != cov.NotImplemented {
		t.Fatalf("coverage %+v", cov)
	}
	if !reflect.DeepEqual(cov.Tunables, tunables()) {
		t.Errorf("coverage tunables %+v, want those TestTunablesAreTrue holds to the code", cov.Tunables)
	}
	for _, x := range cov.Tunables {
		if x.Status == "configurable" {
			if _, ok := entries[x.Key]; !ok {
				t.Errorf("tunable %s names setting %q, which the schema lacks", x.Name, x.Key)
			}
		}
	}
}

// TestURLCredentialsAreRedacted: the configuration views never show the
// credentials of a URL setting: a password, or a NATS token given as the
// user name, in each URL of a list.
func TestURLCredentialsAreRedacted(t *testing.T) {
	c := Config{NATSURL: "nats://alice:pw@n1:4222, nats://t0ken@n2:4222,nats://n3:4222", IPFSGateway: "https://u:secret@ipfs.example"}
	want := map[string]string{
		"NATS_URL":     "nats://alice:xxxxx@n1:4222,nats://xxxxx@n2:4222,nats://n3:4222",
		"IPFS_GATEWAY": "https://u:xxxxx@ipfs.example",
	}
	for _, s := range describeSettings(c) {
		if w, ok := want[s.Name]; ok {
			if got := s.Value(); got != w {
				t.Errorf("%s shown as %v, want %s", s.Key, got, w)
			}
			delete(want, s.Name)
		}
	}
	if len(want) != 0 {
		t.Fatalf("settings not found: %v", want)
	}
}

// TestTunablesAreTrue holds the coverage view (tunables) and the settings
// to the code: every setting's Config field is read by the code that runs
// the validator (readConfigFields), not only checked or described; a
// tunable called configurable names a setting so read; one called fixed or
// not_implemented names none, a fixed one says its value and a
// not_implemented one why.
func TestTunablesAreTrue(t *testing.T) {
	fieldOf := map[string]string{} // setting name -> Config field
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		if name := ct.Field(i).Tag.Get("envconfig"); name != "" {
			fieldOf[name] = ct.Field(i).Name
		}
	}
	read := readConfigFields(t)
	// Every setting does something, but PEER_PLAINTEXT, which only
	// Validate reads: it permits a plaintext peer port, which the
	// transport then runs because no certificate is set. That it is
	// found unread shows the analysis tells the two apart.
	const checkedOnly = "PEER_PLAINTEXT"
	if read[fieldOf[checkedOnly]] {
		t.Errorf("%s is read by the code that runs the validator: count it with the others", checkedOnly)
	}
	for name, field := range fieldOf {
		if !read[field] && name != checkedOnly {
			t.Errorf("setting %s is described, and nothing that runs the validator reads Config.%s", name, field)
		}
	}
	names := map[string]bool{}
	for _, x := range tunables() {
		if names[x.Name] {
			t.Errorf("tunable %s is listed twice", x.Name)
		}
		names[x.Name] = true
		if x.Origin == "" {
			t.Errorf("tunable %s has no origin", x.Name)
		}
		switch x.Status {
		case "configurable":
			field, ok := fieldOf[strings.TrimPrefix(x.Key, configPrefix)]
			switch {
			case !strings.HasPrefix(x.Key, configPrefix) || !ok:
				t.Errorf("tunable %s is configurable by %q, which is not a setting", x.Name, x.Key)
			case !read[field]:
				t.Errorf("tunable %s is configurable by %s, whose field Config.%s nothing that runs the validator reads", x.Name, x.Key, field)
			}
		case "fixed":
			if x.Key != "" || x.Value == "" {
				t.Errorf("fixed tunable %s: key %q, value %q", x.Name, x.Key, x.Value)
			}
		case "not_implemented":
			if x.Key != "" || x.Note == "" {
				t.Errorf("tunable %s not implemented: key %q, note %q", x.Name, x.Key, x.Note)
			}
		default:
			t.Errorf("tunable %s: status %q", x.Name, x.Status)
		}
	}
	// The event history window is kept by EVENTS_RETENTION and _COUNT
	// (ADR 0023); the view once called it not implemented.
	if i := slices.IndexFunc(tunables(), func(x api.Tunable) bool { return x.Name == "event history window" }); i < 0 ||
		tunables()[i].Status != "configurable" || tunables()[i].Key != configPrefix+"EVENTS_RETENTION" {
		t.Errorf("the event history window is not configurable by EVENTS_RETENTION")
	}
}

// readConfigFields returns the fields of Config that the code running the
// validator reads: from Run, every function of this package it names
// (calls, or passes as a value), but the ones that only check or describe
// a Config (Validate, validate*, describe.go), and in those functions the
// selectors X.Field where X is a Config: a parameter or receiver of type
// Config or *Config, a struct field of that type (v.cfg), or a variable
// assigned one of those (cfg := v.cfg). Names are
// matched without type checking, so a method of another type sharing a
// name is followed too: the set can only be too large, never miss a read.
func readConfigFields(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	funcs := map[string][]*ast.FuncDecl{}
	configHolders := map[string]bool{} // struct fields of type Config
	isConfig := func(e ast.Expr) bool {
		if star, ok := e.(*ast.StarExpr); ok {
			e = star.X
		}
		id, ok := e.(*ast.Ident)
		return ok && id.Name == "Config"
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if st, ok := n.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					if isConfig(fl.Type) {
						for _, id := range fl.Names {
							configHolders[id.Name] = true
						}
					}
				}
			}
			return true
		})
		if name == "describe.go" {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
			}
		}
	}
	checksOnly := func(name string) bool { return name == "Validate" || strings.HasPrefix(name, "validate") }

	read := map[string]bool{}
	// The command runs the validator through Run, with the logger
	// Config.Logger builds.
	seen := map[string]bool{"Run": true, "Logger": true}
	queue := []string{"Run", "Logger"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, fd := range funcs[name] {
			configs := map[string]bool{}
			var params []*ast.Field
			if fd.Recv != nil {
				params = append(params, fd.Recv.List...)
			}
			params = append(params, fd.Type.Params.List...)
			for _, p := range params {
				if isConfig(p.Type) {
					for _, id := range p.Names {
						configs[id.Name] = true
					}
				}
			}
			// isConfigValue: e is a Config, as a parameter or a field.
			isConfigValue := func(e ast.Expr) bool {
				switch x := e.(type) {
				case *ast.Ident:
					return configs[x.Name]
				case *ast.SelectorExpr:
					return configHolders[x.Sel.Name]
				}
				return false
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				var ref string
				switch n := n.(type) {
				case *ast.AssignStmt: // cfg := v.cfg
					for i, rhs := range n.Rhs {
						if id, ok := n.Lhs[i].(*ast.Ident); ok && len(n.Lhs) == len(n.Rhs) && isConfigValue(rhs) {
							configs[id.Name] = true
						}
					}
				case *ast.Ident:
					ref = n.Name
				case *ast.SelectorExpr:
					ref = n.Sel.Name
					if isConfigValue(n.X) {
						read[n.Sel.Name] = true
					}
				}
				if _, ok := funcs[ref]; ok && !seen[ref] && !checksOnly(ref) {
					seen[ref] = true
					queue = append(queue, ref)
				}
				return true
			})
		}
	}
	return read
}
