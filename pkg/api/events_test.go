package api

import (
	"encoding/json"
	"testing"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestEventJSON: a finalize event carries its epoch; other events leave the
// field out, so their JSON is as it was.
func TestEventJSON(t *testing.T) {
	for _, c := range []struct {
		ev   *ledgerpb.Event
		want string
	}{
		{&ledgerpb.Event{Id: 7, Type: EventConsensus, Action: "finalize", Timestamp: 1700000000123, CommitIndex: 9, Epoch: 42},
			`{"id":"7","type":"consensus","action":"finalize","path":"","wallet":"","organization":"","timestamp":1700000000123,"commitIndex":9,"epoch":42}`},
		{&ledgerpb.Event{Id: 8, Type: EventWallet, Action: "debt_paid", Wallet: "0xabcdef0123456789abcdef0123456789abcdef01", Timestamp: 5, CommitIndex: 10},
			`{"id":"8","type":"wallet","action":"debt_paid","path":"","wallet":"0xabcdef0123456789abcdef0123456789abcdef01","organization":"","timestamp":5,"commitIndex":10}`},
	} {
		got, err := json.Marshal(EventOf(c.ev))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s\nwant %s", got, c.want)
		}
	}
}
