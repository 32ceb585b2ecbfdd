package app

import (
	"github.com/nats-io/nats.go"

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
