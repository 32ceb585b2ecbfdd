package events

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Content is the Kind of the replicated event log: ids are the log's
// sequence numbers, the same on every validator, so a stream resumes on any
// of them.
type Content struct{}

// ID is the event's sequence number.
func (Content) ID(ev *ledgerpb.Event) uint64 { return ev.GetId() }

// Render writes ev in SSE framing: id (the sequence number), event (the
// type) and one data line of JSON (encoding/json escapes newlines).
func (Content) Render(ev *ledgerpb.Event) ([]byte, error) {
	data, err := json.Marshal(api.EventOf(ev))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(data)+len(ev.GetType())+40)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ev.GetId(), 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.GetType()...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return b, nil
}

// StreamID is the decimal sequence number.
func (Content) StreamID(id uint64) string { return strconv.FormatUint(id, 10) }

// Open reads the filters (ParseFilter) and the resumption point
// (ParseResumePoint) of a request.
func (Content) Open(r *http.Request) (Start[*ledgerpb.Event], *apierror.Error) {
	q := r.URL.Query()
	filter, aerr := ParseFilter(q)
	if aerr != nil {
		return Start[*ledgerpb.Event]{}, aerr
	}
	after, resume, aerr := ParseResumePoint(r.Header.Get(HeaderLastEventID), q)
	if aerr != nil {
		return Start[*ledgerpb.Event]{}, aerr
	}
	return Start[*ledgerpb.Event]{Match: filter.Match, After: after, Resume: resume}, nil
}
