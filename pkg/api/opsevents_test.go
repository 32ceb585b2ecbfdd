package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestOpsEventAttributes: an attribute is present exactly when its type
// sets it, a zero included (no leader known is leader 0, not no leader
// field), and survives a round trip.
func TestOpsEventAttributes(t *testing.T) {
	zero, term := uint64(0), uint64(4)
	e := OpsEvent{ID: 3, At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Type: "leader.changed", Severity: SeverityWarn,
		Message: "no leader known in term 4", Count: 1, Attributes: OpsEventAttributes{Term: &term, Leader: &zero, Role: "CANDIDATE"}}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":3,"at":"2026-03-01T12:00:00Z","type":"leader.changed","severity":"warn","message":"no leader known in term 4",` +
		`"count":1,"attributes":{"term":4,"leader":0,"role":"CANDIDATE"}}`
	if string(raw) != want {
		t.Fatalf("%s\nwant %s", raw, want)
	}
	var back OpsEvent
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	raw, _ = json.Marshal(OpsEvent{Type: "backpressure.off"})
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || len(m["attributes"].(map[string]any)) != 0 {
		t.Fatalf("an event without figures: %s", raw)
	}
}
