package opsevents

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/events"
)

// The operational events as Server-Sent Events (GET /v1/ops/events/stream,
// ADR 0039): the content stream's machinery (internal/events) over the
// recorder's ring, with its own ids, filters and resumption.

// Query parameters of the operational stream.
const (
	paramTypes    = "types"
	paramSeverity = "severity"
)

// maxTypeValues bounds the types one request lists.
const maxTypeValues = 64

// Stream is the events.Kind of the operational events: a stream id is the
// recorder's boot id and the event's id, BootID-N.
type Stream struct {
	rec *Recorder
}

// NewStream returns the stream kind of rec's events; rec is also the log
// the hub follows (events.New(rec, NewStream(rec), ...)).
func NewStream(rec *Recorder) Stream { return Stream{rec: rec} }

var _ events.Source[Event] = (*Recorder)(nil)
var _ events.Kind[Event] = Stream{}

// ID is the event's id in the recorder.
func (Stream) ID(e Event) uint64 { return e.ID }

// StreamID is BootID-id.
func (k Stream) StreamID(id uint64) string { return k.rec.boot + "-" + strconv.FormatUint(id, 10) }

// Render writes e as one SSE message: its stream id, its type as the event
// name and its API form (as /v1/events/recent lists it) as one data line.
func (k Stream) Render(e Event) ([]byte, error) {
	data, err := json.Marshal(e.API())
	if err != nil {
		return nil, err
	}
	name := e.Type.String()
	b := make([]byte, 0, len(data)+len(name)+60)
	b = append(b, "id: "...)
	b = append(b, k.StreamID(e.ID)...)
	b = append(b, "\nevent: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...), nil
}

// Open reads the filters (ParseFilter) and the resumption point of a
// request. A point of this process resumes after it; any other (the
// process restarted, another validator's, an id ahead of this process, a
// bare number) starts over at the oldest event kept, after a reset event.
func (k Stream) Open(r *http.Request) (events.Start[Event], *apierror.Error) {
	q := r.URL.Query()
	f, aerr := ParseFilter(q)
	if aerr != nil {
		return events.Start[Event]{}, aerr
	}
	start := events.Start[Event]{Match: f.Match}
	value, field, present, aerr := events.ResumeValue(r.Header.Get(events.HeaderLastEventID), q)
	if aerr != nil || !present {
		return start, aerr
	}
	boot, id, ok := ParseStreamID(value)
	if !ok {
		return events.Start[Event]{}, apierror.Field(field,
			"%q is not an operational event id (the id the stream sent: 16 hex digits, a dash, a sequence number)", events.Clip(value))
	}
	start.Resume = true
	if boot == k.rec.boot && id <= k.rec.LastEventID() {
		start.After = id
		return start, nil
	}
	start.Notice = events.ControlFrame(api.EventReset, api.StreamReset{LastEventID: events.Clip(value), BootID: k.rec.boot})
	return start, nil
}

// ParseStreamID reads a stream id, BootID-N: a boot id of 16 lowercase hex
// digits, a dash and the decimal form of a uint64. A bare decimal number
// (an id of the replicated stream, which this route served before) is
// accepted as an id of no process: boot is empty.
func ParseStreamID(s string) (boot string, id uint64, ok bool) {
	boot, seq, dashed := strings.Cut(s, "-")
	if !dashed {
		seq, boot = s, ""
	} else if !isBoot(boot) {
		return "", 0, false
	}
	if seq == "" || len(seq) > 20 || strings.TrimLeft(seq, "0123456789") != "" {
		return "", 0, false
	}
	id, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return boot, id, true
}

func isBoot(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Filter selects the operational events a stream sends.
type Filter struct {
	types    [numTypes]bool // all false: every type
	anyType  bool
	severity Severity // the least sent
}

// ParseFilter reads the filters of an operational stream request:
//
//   - types: event types (leader.changed, ...) or families (the part
//     before the dot: gc, snapshot, ...), comma-separated or repeated;
//     absent, every type;
//   - severity: the least severity sent, one of info, warn, critical;
//     absent, info (everything).
//
// The content stream's filters (wallets, organizations, path) are refused:
// these events are not filtered by them. Other parameters are ignored. An
// invalid value is an invalid_field error naming the parameter.
func ParseFilter(q url.Values) (*Filter, *apierror.Error) {
	// The content stream's filters: these events are not filtered by them,
	// and a stream asking for them is refused rather than sent everything.
	for _, name := range [...]string{"wallets", "organizations", "path"} {
		if _, given := q[name]; given {
			return nil, apierror.Field(name, "not a filter of the operational event stream (it filters by types and severity); the content events are on /v1/events/stream")
		}
	}
	f := &Filter{anyType: true}
	n := 0
	for _, v := range q[paramTypes] {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				return nil, apierror.Field(paramTypes, "empty value")
			}
			if n++; n > maxTypeValues {
				return nil, apierror.Field(paramTypes, "at most %d values", maxTypeValues)
			}
			if !f.addType(item) {
				return nil, apierror.Field(paramTypes, "%q is not an operational event type or family (%s)", events.Clip(item), typeNames())
			}
		}
	}
	if vs, given := q[paramSeverity]; given {
		if len(vs) != 1 {
			return nil, apierror.Field(paramSeverity, "give one severity, not %d", len(vs))
		}
		sev, ok := parseSeverity(vs[0])
		if !ok {
			return nil, apierror.Field(paramSeverity, "%q is not a severity (info, warn, critical)", events.Clip(vs[0]))
		}
		f.severity = sev
	}
	return f, nil
}

// addType selects a type by name, or a family by the part before the dot.
func (f *Filter) addType(name string) bool {
	found := false
	for _, t := range Types() {
		s := t.String()
		if s == name || (strings.HasPrefix(s, name) && s[len(name)] == '.') {
			f.types[t], found = true, true
		}
	}
	if found {
		f.anyType = false
	}
	return found
}

func typeNames() string {
	names := make([]string, 0, numTypes)
	for _, t := range Types() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

func parseSeverity(s string) (Severity, bool) {
	for _, sev := range Severities() {
		if sev.String() == s {
			return sev, true
		}
	}
	return 0, false
}

// Match reports whether the stream sends e.
func (f *Filter) Match(e Event) bool {
	if f == nil {
		return true
	}
	return e.Severity >= f.severity && (f.anyType || (e.Type < numTypes && f.types[e.Type]))
}
