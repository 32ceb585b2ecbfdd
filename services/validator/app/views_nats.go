package app

import (
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/api"
)

// What a validator does over a NATS connection (api.NATSConnection.Uses).
const (
	natsUsePayments    = "payments"
	natsUseChainStatus = "chainStatus"
	natsUseEvents      = "events"
	natsUseStreams     = "streams"
)

// natsClient is one of the validator's NATS connections and what it is
// used for, for the runtime snapshot.
type natsClient struct {
	conn *nats.Conn
	uses []string
}

// natsClients names the connections Run opened: conn, the one payment
// verification needs (nil in MOCK mode), and events, the event publisher's
// own when the mode needs no other (see newEventPublishing).
func natsClients(conn *nats.Conn, events *eventPublishing) []natsClient {
	var out []natsClient
	if conn != nil {
		uses := []string{natsUsePayments, natsUseChainStatus}
		if events.nc == conn {
			uses = append(uses, natsUseEvents)
		}
		out = append(out, natsClient{conn: conn, uses: append(uses, natsUseStreams)})
	}
	if events.own {
		out = append(out, natsClient{conn: events.nc, uses: []string{natsUseEvents, natsUseStreams}})
	}
	return out
}

// natsConnections reads the client library's figures of each connection.
func natsConnections(clients []natsClient) []api.NATSConnection {
	out := make([]api.NATSConnection, 0, len(clients))
	for _, c := range clients {
		st := c.conn.Stats()
		n := api.NATSConnection{Name: c.conn.Opts.Name, Uses: c.uses, Connected: c.conn.IsConnected(), Status: c.conn.Status().String(),
			ServerURL: c.conn.ConnectedUrlRedacted(), InMsgs: st.InMsgs, OutMsgs: st.OutMsgs, InBytes: st.InBytes, OutBytes: st.OutBytes,
			Reconnects: st.Reconnects}
		if err := c.conn.LastError(); err != nil {
			n.LastError = err.Error()
		}
		out = append(out, n)
	}
	return out
}
