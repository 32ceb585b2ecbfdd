package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// The configuration views (/v1/config/osgi/*, ADR 0016) show the settings
// as internal/settings describes them from the validator's Config, and the
// tunables the contract, the ADRs (docs/adr) and the architecture
// (docs/architecture.md) name.

// reloadRestart is the reload mode of every setting: the validator reads its
// configuration once, at start.
const reloadRestart = "restart"

// configValues serves GET /v1/config/osgi: the effective values by component.
func (s *Server) configValues(c echo.Context) error {
	components := map[string]map[string]any{}
	for _, st := range s.deps.Settings {
		if components[st.Component] == nil {
			components[st.Component] = map[string]any{}
		}
		components[st.Component][st.Key] = st.Value()
	}
	return c.JSON(http.StatusOK, api.ConfigValues{ContractVersion: api.ConfigValuesVersion, NodeID: s.cfg.NodeID, ReloadMode: reloadRestart,
		Components: components})
}

// configSchema serves GET /v1/config/osgi/schema: every setting's metadata.
func (s *Server) configSchema(c echo.Context) error {
	out := api.ConfigSchema{ContractVersion: api.ConfigSchemaVersion, NodeID: s.cfg.NodeID, Entries: []api.ConfigEntry{}}
	for _, st := range s.deps.Settings {
		out.Entries = append(out.Entries, api.ConfigEntry{Key: st.Key, Component: st.Component, Type: st.Type, Enum: st.Enum,
			Default: st.Default, ReloadMode: reloadRestart, Risk: st.Risk, Description: st.Description, Secret: st.Secret})
	}
	return c.JSON(http.StatusOK, out)
}

// configSources serves GET /v1/config/osgi/sources: where each value comes from.
func (s *Server) configSources(c echo.Context) error {
	out := api.ConfigSources{ContractVersion: api.ConfigSourcesVersion, NodeID: s.cfg.NodeID, Sources: []api.ConfigSource{},
		Gaps: []api.Gap{{Field: "file", Reason: "the validator reads no configuration file: values come from defaults, " +
			"the environment, or the program that started it"}}}
	for _, st := range s.deps.Settings {
		src, envSet := st.Source()
		out.Sources = append(out.Sources, api.ConfigSource{Key: st.Key, Source: src, EnvSet: envSet})
	}
	return c.JSON(http.StatusOK, out)
}

// configDelta serves GET /v1/config/osgi/delta: the settings whose value is
// not their default.
func (s *Server) configDelta(c echo.Context) error {
	out := api.ConfigDelta{ContractVersion: api.ConfigDeltaVersion, NodeID: s.cfg.NodeID, Changed: []api.ConfigChange{}}
	for _, st := range s.deps.Settings {
		if st.IsDefault() {
			continue
		}
		src, _ := st.Source()
		out.Changed = append(out.Changed, api.ConfigChange{Key: st.Key, Component: st.Component, Current: st.Value(),
			Default: st.DefaultValue(), Source: src})
	}
	return c.JSON(http.StatusOK, out)
}

// configCoverage serves GET /v1/config/osgi/coverage: the tunables, which of
// them a setting covers, which are fixed in code, and which have nothing to
// tune yet.
func (s *Server) configCoverage(c echo.Context) error {
	t := s.deps.Tunables
	out := api.ConfigCoverage{ContractVersion: api.ConfigCoverageVersion, NodeID: s.cfg.NodeID, Settings: len(s.deps.Settings), Tunables: t,
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
