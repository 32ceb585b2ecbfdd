package app

import (
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/api"
	httpapi "github.com/contentledger/contentledger/services/validator/internal/api"
)

// natsClients names the connections Run opened: conn, the one payment
// verification needs (nil in MOCK mode), and events, the event publisher's
// own when the mode needs no other (see newEventPublishing).
func natsClients(conn *nats.Conn, events *eventPublishing) []httpapi.NATSClient {
	var out []httpapi.NATSClient
	if conn != nil {
		uses := []string{httpapi.NATSUsePayments, httpapi.NATSUseChainStatus}
		if events.nc == conn {
			uses = append(uses, httpapi.NATSUseEvents)
		}
		out = append(out, httpapi.NATSClient{Conn: conn, Uses: append(uses, httpapi.NATSUseStreams)})
	}
	if events.own {
		out = append(out, httpapi.NATSClient{Conn: events.nc, Uses: []string{httpapi.NATSUseEvents, httpapi.NATSUseStreams}})
	}
	return out
}

// natsConnections reads the client library's figures of each connection.
func natsConnections(clients []httpapi.NATSClient) []api.NATSConnection {
	out := make([]api.NATSConnection, 0, len(clients))
	for _, c := range clients {
		st := c.Conn.Stats()
		n := api.NATSConnection{Name: c.Conn.Opts.Name, Uses: c.Uses, Connected: c.Conn.IsConnected(), Status: c.Conn.Status().String(),
			ServerURL: c.Conn.ConnectedUrlRedacted(), InMsgs: st.InMsgs, OutMsgs: st.OutMsgs, InBytes: st.InBytes, OutBytes: st.OutBytes,
			Reconnects: st.Reconnects}
		if err := c.Conn.LastError(); err != nil {
			n.LastError = err.Error()
		}
		out = append(out, n)
	}
	return out
}
