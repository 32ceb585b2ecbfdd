package api

// Contract version markers of the configuration routes (/v1/config/osgi/*,
// ADR 0008).
const (
	ConfigValuesVersion   = "config.osgi.v1"
	ConfigSchemaVersion   = "config.osgi.schema.v1"
	ConfigSourcesVersion  = "config.osgi.sources.v1"
	ConfigCoverageVersion = "config.osgi.coverage.v1"
	ConfigDeltaVersion    = "config.osgi.delta.v1"
)

// ConfigValues is the body of GET /v1/config/osgi: the effective value of
// every setting, by component, keyed by its environment variable. Secrets
// are "<redacted>" when set.
type ConfigValues struct {
	ContractVersion string                    `json:"contractVersion"`
	NodeID          uint64                    `json:"nodeId"`
	ReloadMode      string                    `json:"reloadMode"`
	Components      map[string]map[string]any `json:"components"`
}

// ConfigSchema is the body of GET /v1/config/osgi/schema.
type ConfigSchema struct {
	ContractVersion string        `json:"contractVersion"`
	NodeID          uint64        `json:"nodeId"`
	Entries         []ConfigEntry `json:"entries"`
}

// ConfigEntry describes one setting. Default is as the setting's
// documentation writes it, "" when it has none.
type ConfigEntry struct {
	Key         string   `json:"key"`
	Component   string   `json:"component"`
	Type        string   `json:"type"` // string, integer, number, boolean, duration, secret
	Enum        []string `json:"enum,omitempty"`
	Default     string   `json:"default"`
	ReloadMode  string   `json:"reloadMode"` // restart: read once, at start
	Risk        string   `json:"risk"`       // low, medium, high
	Description string   `json:"description"`
	Secret      bool     `json:"secret"`
}

// ConfigSources is the body of GET /v1/config/osgi/sources.
type ConfigSources struct {
	ContractVersion string         `json:"contractVersion"`
	NodeID          uint64         `json:"nodeId"`
	Sources         []ConfigSource `json:"sources"`
	Gaps            []Gap          `json:"gaps"`
}

// ConfigSource says where a setting's value comes from: default, env (the
// process environment), or caller (the program that started the validator
// in-process).
type ConfigSource struct {
	Key    string `json:"key"`
	Source string `json:"source"`
	EnvSet bool   `json:"envSet"`
}

// ConfigCoverage is the body of GET /v1/config/osgi/coverage: the known
// tunables, and which a setting covers.
type ConfigCoverage struct {
	ContractVersion string    `json:"contractVersion"`
	NodeID          uint64    `json:"nodeId"`
	Settings        int       `json:"settings"`
	Configurable    int       `json:"configurable"`
	Fixed           int       `json:"fixed"`
	NotImplemented  int       `json:"notImplemented"`
	Tunables        []Tunable `json:"tunables"`
	Gaps            []Gap     `json:"gaps"`
}

// Tunable is one tunable the contract or the design names: configurable
// (Key is its setting), fixed (Value is what the code uses), or
// not_implemented (nothing to tune yet).
type Tunable struct {
	Name   string `json:"name"`
	Origin string `json:"origin"`
	Status string `json:"status"`
	Key    string `json:"key,omitempty"`
	Value  string `json:"value,omitempty"`
	Note   string `json:"note,omitempty"`
}

// ConfigDelta is the body of GET /v1/config/osgi/delta: the settings whose
// value differs from their default.
type ConfigDelta struct {
	ContractVersion string         `json:"contractVersion"`
	NodeID          uint64         `json:"nodeId"`
	Changed         []ConfigChange `json:"changed"`
}

// ConfigChange is one setting off its default.
type ConfigChange struct {
	Key       string `json:"key"`
	Component string `json:"component"`
	Current   any    `json:"current"`
	Default   any    `json:"default"`
	Source    string `json:"source"`
}
