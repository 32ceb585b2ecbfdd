package app

import (
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// The configuration views (/v1/config/osgi/*, DECISIONS D10) describe Config
// from its own struct tags (envconfig name, default, description), so that a
// setting added to Config is described without a second list to keep; what
// the tags do not say (component, risk) comes from settingClass, and a test
// holds it to Config.

// configPrefix is the environment prefix of the validator's settings.
const configPrefix = "SVC_VALIDATOR_"

// reloadRestart is the reload mode of every setting: the validator reads its
// configuration once, at start.
const reloadRestart = "restart"

// redacted stands for the value of a secret that is set.
const redacted = "<redacted>"

// settingClass is the component a setting belongs to and the risk of
// changing it: high where a wrong value loses data, splits or stalls the
// cluster, or opens it; medium where it changes throughput or latency
// noticeably; low otherwise. ok is false for a name it does not know.
func settingClass(name string) (component, risk string, ok bool) {
	switch name {
	case "MODE", "NODE_ID", "CLUSTER_ID", "DATA_DIR":
		return "node", "high", true
	case "NO_SYNC":
		return "storage", "high", true
	case "HTTP_ADDR", "DEBUG_ADDR":
		return "api", "medium", true
	case "AUTH_TOKEN":
		return "api", "high", true
	case "RATE_PER_IP", "RATE_PER_WALLET":
		return "api", "medium", true
	case "PEER_ADDR", "INITIAL_CLUSTER", "JOIN", "PEER_TLS_CERT", "PEER_TLS_KEY", "PEER_TLS_CA":
		return "raft", "high", true
	case "TICK_INTERVAL", "SNAPSHOT_ENTRIES", "COMPACTION_MARGIN", "LOG_TRUNCATION":
		return "raft", "medium", true
	case "CHAIN_ID", "CONTRACT_ADDRESS", "CONFIRMATIONS":
		return "chain", "high", true
	case "USDC_ADDRESS":
		return "chain", "medium", true
	case "NATS_URL", "PAYMENT_STREAM", "WATCHER_BUCKET":
		return "chain", "high", true
	case "PAYMENT_WAIT":
		return "chain", "medium", true
	case "NATS_EVENTS", "NATS_EVENTS_STREAM", "NATS_EVENTS_MAX_MSGS", "NATS_EVENTS_MAX_BYTES":
		return "events", "high", true
	case "NATS_EVENTS_DUPLICATES":
		return "events", "medium", true
	case "CONTENT_ROOT":
		return "content", "high", true
	case "MAX_MESSAGE_BYTES":
		return "content", "medium", true
	case "EPOCH_LENGTH":
		return "pipeline", "high", true
	case "MAX_PENDING", "MAX_BATCH", "MICRO_BATCH", "MICRO_BATCH_BYTES", "VERIFIERS", "CLASS_AGING", "MAX_PENDING_MESSAGES":
		return "pipeline", "medium", true
	case "EVENTS_RETENTION", "EVENTS_RETENTION_COUNT": // the leader's values apply to every validator
		return "events", "high", true
	case "EVENTS_STREAM_PER_IP", "EVENTS_STREAM_RATE", "EVENTS_STREAM_QUEUE", "EVENTS_KEEPALIVE":
		return "events", "medium", true
	case "IPFS_GATEWAY", "IPFS_GATEWAY_CHECK": // only checked and reported: nothing else depends on them
		return "blobstore", "low", true
	}
	return "", "", false
}

// setting is one field of Config, described.
type setting struct {
	name      string // the envconfig name; the key is configPrefix + name
	component string
	risk      string
	typ       string
	enum      []string
	def       string // the default as the tag writes it; "" none
	desc      string
	secret    bool
	// urlCredentials: the value is a URL that may carry credentials, which
	// the views redact.
	urlCredentials bool
	value          reflect.Value
	defValue       any // the default parsed to the field's type; nil when none or unparsable
}

func (s setting) key() string { return configPrefix + s.name }

// rendered is the value as the views show it: durations as Go writes them,
// secrets and the credentials in URLs redacted.
func (s setting) rendered() any {
	if s.secret {
		if s.value.String() == "" {
			return ""
		}
		return redacted
	}
	if s.urlCredentials && s.value.String() != "" {
		return redactURLs(s.value.String())
	}
	return render(s.value.Interface())
}

// redactURLs redacts the credentials of each URL of a comma-separated list
// (a NATS token is the user name, so that goes too); one that does not
// parse is redacted whole.
func redactURLs(list string) string {
	urls := strings.Split(list, ",")
	for i, raw := range urls {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			urls[i] = redacted
			continue
		}
		urls[i] = blobgateway.Redacted(u)
	}
	return strings.Join(urls, ",")
}

func render(v any) any {
	switch v := v.(type) {
	case time.Duration:
		return v.String()
	case Mode:
		return string(v)
	}
	return v
}

// isDefault reports whether the effective value is the default (the zero
// value when there is none).
func (s setting) isDefault() bool {
	if s.defValue == nil {
		return s.value.IsZero()
	}
	return reflect.DeepEqual(s.value.Interface(), s.defValue)
}

// source says where the effective value comes from: "env" when the
// variable is set in the process environment to this value, "default" when
// it is the default and the variable is unset, "caller" otherwise (the
// program that started the validator set it, as tools/devnet and the tests
// do in-process).
func (s setting) source() (source string, envSet bool) {
	raw, envSet := os.LookupEnv(s.key())
	if envSet {
		if v, ok := parseSetting(s.value.Type(), raw); ok && reflect.DeepEqual(v, s.value.Interface()) {
			return "env", true
		}
		return "caller", true
	}
	if s.isDefault() {
		return "default", false
	}
	return "caller", false
}

// parseSetting parses raw to typ as envconfig does, for the kinds Config
// uses.
func parseSetting(typ reflect.Type, raw string) (any, bool) {
	if typ == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(raw)
		return d, err == nil
	}
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, false
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(raw, 0, 64)
		if err != nil {
			return nil, false
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(raw, 0, 64)
		if err != nil {
			return nil, false
		}
		v.SetUint(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return nil, false
		}
		v.SetFloat(f)
	default:
		return nil, false
	}
	return v.Interface(), true
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "integer"
	case reflect.Float64:
		return "number"
	}
	return "string"
}

// settings describes every field of cfg that has an envconfig name; the
// defaults that depend on the mode are cfg.Mode's.
func settings(cfg Config) []setting {
	v := reflect.ValueOf(cfg)
	t := v.Type()
	var out []setting
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		component, risk, _ := settingClass(name)
		s := setting{name: name, component: component, risk: risk, typ: typeName(f.Type), def: f.Tag.Get("default"),
			desc: f.Tag.Get("desc"), secret: name == "AUTH_TOKEN", urlCredentials: name == "IPFS_GATEWAY" || name == "NATS_URL", value: v.Field(i)}
		if s.secret {
			s.typ = "secret"
		}
		if f.Type == reflect.TypeFor[Mode]() {
			s.enum = []string{string(Mock), string(Testnet), string(Mainnet)}
		}
		confirmations, wait := modeDefaults(cfg.Mode)
		switch name {
		case "CONFIRMATIONS":
			s.def = strconv.FormatUint(confirmations, 10)
		case "PAYMENT_WAIT":
			s.def = wait.String()
		}
		if s.def != "" {
			if d, ok := parseSetting(f.Type, s.def); ok {
				s.defValue = d
			}
		}
		out = append(out, s)
	}
	return out
}

// configViews serves /v1/config/osgi/*.
type configViews struct {
	nodeID   uint64
	settings []setting
}

func newConfigViews(cfg Config) *configViews {
	return &configViews{nodeID: cfg.NodeID, settings: settings(cfg)}
}

func (v *configViews) register(e *echo.Echo) {
	e.GET("/v1/config/osgi", v.values)
	e.GET("/v1/config/osgi/schema", v.schema)
	e.GET("/v1/config/osgi/sources", v.sources)
	e.GET("/v1/config/osgi/coverage", v.coverage)
	e.GET("/v1/config/osgi/delta", v.delta)
}

// values serves GET /v1/config/osgi: the effective values by component.
func (v *configViews) values(c echo.Context) error {
	components := map[string]map[string]any{}
	for _, s := range v.settings {
		if components[s.component] == nil {
			components[s.component] = map[string]any{}
		}
		components[s.component][s.key()] = s.rendered()
	}
	return c.JSON(http.StatusOK, api.ConfigValues{ContractVersion: api.ConfigValuesVersion, NodeID: v.nodeID, ReloadMode: reloadRestart,
		Components: components})
}

// schema serves GET /v1/config/osgi/schema: every setting's metadata.
func (v *configViews) schema(c echo.Context) error {
	out := api.ConfigSchema{ContractVersion: api.ConfigSchemaVersion, NodeID: v.nodeID, Entries: []api.ConfigEntry{}}
	for _, s := range v.settings {
		out.Entries = append(out.Entries, api.ConfigEntry{Key: s.key(), Component: s.component, Type: s.typ, Enum: s.enum,
			Default: s.def, ReloadMode: reloadRestart, Risk: s.risk, Description: s.desc, Secret: s.secret})
	}
	return c.JSON(http.StatusOK, out)
}

// sources serves GET /v1/config/osgi/sources: where each value comes from.
func (v *configViews) sources(c echo.Context) error {
	out := api.ConfigSources{ContractVersion: api.ConfigSourcesVersion, NodeID: v.nodeID, Sources: []api.ConfigSource{},
		Gaps: []api.Gap{{Field: "file", Reason: "the validator reads no configuration file: values come from defaults, " +
			"the environment, or the program that started it"}}}
	for _, s := range v.settings {
		src, envSet := s.source()
		out.Sources = append(out.Sources, api.ConfigSource{Key: s.key(), Source: src, EnvSet: envSet})
	}
	return c.JSON(http.StatusOK, out)
}

// delta serves GET /v1/config/osgi/delta: the settings whose value is not
// their default.
func (v *configViews) delta(c echo.Context) error {
	out := api.ConfigDelta{ContractVersion: api.ConfigDeltaVersion, NodeID: v.nodeID, Changed: []api.ConfigChange{}}
	for _, s := range v.settings {
		if s.isDefault() {
			continue
		}
		src, _ := s.source()
		var def any = s.def
		if s.defValue != nil {
			def = render(s.defValue)
		}
		out.Changed = append(out.Changed, api.ConfigChange{Key: s.key(), Component: s.component, Current: s.rendered(),
			Default: def, Source: src})
	}
	return c.JSON(http.StatusOK, out)
}

// coverage serves GET /v1/config/osgi/coverage: the tunables the contract,
// the decisions and the architecture name, and which of them a setting
// covers, which are fixed in code, and which have nothing to tune yet.
func (v *configViews) coverage(c echo.Context) error {
	t := []api.Tunable{
		{Name: "max_pending_messages", Origin: "contract", Status: "configurable", Key: configPrefix + "MAX_PENDING_MESSAGES"},
		{Name: "epoch length", Origin: "DECISIONS D7", Status: "configurable", Key: configPrefix + "EPOCH_LENGTH"},
		{Name: "message size limit", Origin: "DECISIONS D3", Status: "configurable", Key: configPrefix + "MAX_MESSAGE_BYTES"},
		{Name: "content_root", Origin: "DECISIONS D3", Status: "configurable", Key: configPrefix + "CONTENT_ROOT"},
		{Name: "payment wait", Origin: "DECISIONS D6", Status: "configurable", Key: configPrefix + "PAYMENT_WAIT"},
		{Name: "required confirmations", Origin: "DECISIONS D6", Status: "configurable", Key: configPrefix + "CONFIRMATIONS"},
		{Name: "GC debt limit", Origin: "DECISIONS D9", Status: "fixed", Value: api.DebtString(state.DefaultDebtLimitMicros),
			Note: "the default limit; POST /v1/gc/account/{wallet}/set-limit sets one wallet's"},
		{Name: "GC debt per deleted MB", Origin: "DECISIONS D9", Status: "fixed", Value: "0.10", Note: "at least 1 MB per delete"},
		{Name: "retained segment generations", Origin: "contract", Status: "fixed", Value: strconv.Itoa(retainedGenerations),
			Note: "fixed by the contract"},
		{Name: "TAR file target size", Origin: "ARCHITECTURE", Status: "fixed", Value: strconv.Itoa(tarTargetBytes)},
		{Name: "Pebble block cache", Origin: "ARCHITECTURE", Status: "fixed", Value: strconv.Itoa(storage.DefaultCacheSize)},
		{Name: "Pebble memtable", Origin: "ARCHITECTURE", Status: "fixed", Value: strconv.Itoa(storage.DefaultMemTableSize)},
		{Name: "gcSizeDeltaEstimation", Origin: "contract", Status: "not_implemented", Note: "no GC compaction runs (default 1 GB)"},
		{Name: "retryCount", Origin: "contract", Status: "not_implemented", Note: "no GC compaction runs (default 5)"},
		{Name: "forceTimeout", Origin: "contract", Status: "not_implemented", Note: "no GC compaction runs (default 60s)"},
		{Name: "memoryThreshold", Origin: "contract", Status: "not_implemented", Note: "no GC compaction runs (default 5%)"},
		{Name: "event history window", Origin: "DECISIONS D8", Status: "not_implemented",
			Note: "events are kept without a window (default 72 h or 1,000,000 events)"},
	}
	out := api.ConfigCoverage{ContractVersion: api.ConfigCoverageVersion, NodeID: v.nodeID, Settings: len(v.settings), Tunables: t,
		Gaps: []api.Gap{}}
	for _, x := range t {
		switch x.Status {
		case "configurable":
			out.Configurable++
		case "fixed":
			out.Fixed++
		default:
			out.NotImplemented++
			out.Gaps = append(out.Gaps, api.Gap{Field: "tunables." + x.Name, Reason: x.Note})
		}
	}
	return c.JSON(http.StatusOK, out)
}
