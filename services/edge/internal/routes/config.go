package routes

import (
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// eachConfig is a configuration view that differs by validator (values,
// sources, delta): every validator's answer side by side, with the members
// named in keep, and the validators' gaps said once each.
func (s *server) eachConfig(src string, keep ...string) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := s.reader(c)
		vs, bodies, err := eachSnapshot(s, r, at(src), func(base string, body *map[string]json.RawMessage) map[string]any {
			v := map[string]any{"url": base, "reachable": true}
			var id uint64
			if json.Unmarshal((*body)["nodeId"], &id) == nil {
				v["nodeId"] = api.NodeName(id)
			}
			for _, k := range keep {
				v[k] = (*body)[k]
			}
			return v
		})
		if err != nil {
			return err
		}
		var gaps [][]gap
		for _, b := range bodies {
			var g []api.Gap
			if b != nil && json.Unmarshal((*b)["gaps"], &g) == nil {
				gaps = append(gaps, validatorGaps(g, "validators[].", src))
			}
		}
		return s.envelope(c, map[string]any{"validators": vs, "gaps": mergeGaps(gaps...), "sources": r.attempts()})
	}
}
