package openapi

import (
	"encoding/json"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// FuzzCheck feeds arbitrary answers, as a validator (or whatever answers in
// its place) might send them, through the contract check of every source
// route. It must never panic, and an accepted 200 of a route with a
// contractVersion marker must be a JSON object carrying that marker.
func FuzzCheck(f *testing.F) {
	_, c := contract(f)
	routes := c.Routes()
	good, _ := json.Marshal(api.Finality{ContractVersion: api.FinalityVersion, CurrentEpoch: 3})
	for _, seed := range []string{string(good), `{}`, `[]`, `null`, `{"contractVersion":1}`, `{"status":"ok","checks":{}}`, "\xff"} {
		for i := range routes {
			f.Add(uint16(i), uint16(200), []byte(seed))
		}
	}
	f.Add(uint16(0), uint16(503), []byte(`{"status":"unavailable"}`))
	f.Fuzz(func(t *testing.T, route, status uint16, body []byte) {
		r := routes[int(route)%len(routes)]
		if err := c.Check(r, int(status), body); err != nil || status != 200 || c.Marker(r) == "" {
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("%s: accepted a body that is not a JSON object: %q", r, body)
		}
		if obj["contractVersion"] != c.Marker(r) {
			t.Fatalf("%s: accepted contractVersion %v, the route's marker is %q", r, obj["contractVersion"], c.Marker(r))
		}
	})
}
