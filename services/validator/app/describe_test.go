package app

import (
	"encoding/json"
	"net/http"
	"reflect"
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
