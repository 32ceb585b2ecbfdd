package ops

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"
)

func topLevel(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestEnvelopeMembers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	if got := topLevel(t, NewEnvelope(now, "c1", nil)); !reflect.DeepEqual(got, []string{"clusterId", "data", "generatedAt", "version"}) {
		t.Fatalf("envelope members %v", got)
	}
	if got := topLevel(t, NewEnvelope(now, "", map[string]any{"a": 1})); !reflect.DeepEqual(got, []string{"data", "generatedAt", "version"}) {
		t.Fatalf("envelope without cluster id: %v", got)
	}
	b, _ := json.Marshal(NewEnvelope(now, "", nil))
	if string(b) != `{"version":"v1","generatedAt":"2026-01-02T02:04:05Z","data":{}}` {
		t.Fatalf("envelope JSON %s", b)
	}
}

func TestErrorEnvelope(t *testing.T) {
	e := NewError(time.Unix(0, 0), "source_unavailable", "no validator answered", true)
	e.Error.Details = map[string]any{"route": "/v1/x", "code": "overridden?"}
	if got := topLevel(t, e); !reflect.DeepEqual(got, []string{"error", "generatedAt", "version"}) {
		t.Fatalf("error envelope members %v", got)
	}
	b, _ := json.Marshal(e)
	var back ErrorEnvelope
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Error.Code != "source_unavailable" || !back.Error.Retryable || back.Error.Details["route"] != "/v1/x" {
		t.Fatalf("round trip %+v", back.Error)
	}
	if _, ok := back.Error.Details["code"]; ok {
		t.Fatal("a detail replaced the code member")
	}
}
