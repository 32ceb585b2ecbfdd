package epochs

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// answers is a beacon node in memory: each path's body, status 200.
type answers map[string][]byte

func (a answers) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok := a[r.URL.Path]
	status := http.StatusOK
	if !ok {
		status = http.StatusNotFound
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

// FuzzBeaconRead feeds arbitrary answers of a beacon node (genesis, spec,
// finality checkpoints, head header) to the beacon source. It must never
// panic, and a reading it returns must be a valid update in the unix-time
// numbering: finalized at most current, current the head slot's time over
// the epoch length.
func FuzzBeaconRead(f *testing.F) {
	f.Add([]byte(`{"data":{"genesis_time":"1606824023"}}`), []byte(`{"data":{"SECONDS_PER_SLOT":"12","SLOTS_PER_EPOCH":"32"}}`),
		[]byte(`{"data":{"finalized":{"epoch":"98"}}}`), []byte(`{"data":{"header":{"message":{"slot":"3200"}}}}`))
	f.Add([]byte(`{"data":{"genesis_time":0}}`), []byte(`{"data":{"SECONDS_PER_SLOT":"1","SLOTS_PER_EPOCH":"1"}}`),
		[]byte(`{"data":{"finalized":{"epoch":"18446744073709551615"}}}`), []byte(`{"data":{"header":{"message":{"slot":"18446744073709551615"}}}}`))
	f.Add([]byte(`{}`), []byte(`null`), []byte(`[]`), []byte(`"x"`))
	f.Fuzz(func(t *testing.T, genesis, spec, checkpoints, head []byte) {
		b, err := NewBeacon("http://beacon.test", time.Second, WithEpochLength(384*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		b.client = &http.Client{Transport: answers{
			"/eth/v1/beacon/genesis":                          genesis,
			"/eth/v1/config/spec":                             spec,
			"/eth/v1/beacon/states/head/finality_checkpoints": checkpoints,
			"/eth/v1/beacon/headers/head":                     head,
		}}
		u, err := b.Read(context.Background())
		if err != nil {
			return
		}
		u.ChainID = 1 // the publisher's to set
		if err := u.Validate(); err != nil {
			t.Fatalf("invalid update %+v: %v", u, err)
		}
		headTime, ok := b.chain.slotTime(u.Slot)
		if !ok || headTime/b.length != u.Current {
			t.Fatalf("slot %d (time %d, %v) gave current epoch %d", u.Slot, headTime, ok, u.Current)
		}
	})
}
