package routes

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// Bounds of limit on /ops/v1/events/recent (the contract's Limits: 1 to 50)
// and its value when absent.
const (
	eventsLimitMax     = 50
	eventsLimitDefault = 20
)

// validatorEvent is one validator's event, named by the validator.
type validatorEvent struct {
	Validator string `json:"validator"`
	api.OpsEvent
}

// eventsRecent merges every validator's newest operational events, newest
// first. Each validator is asked for the most any limit can show, so that
// one read per validator (and one kept answer) serves every limit: the
// newest limit events of the cluster are among each validator's newest
// limit. Validators' clocks order the merge.
func (s *server) eventsRecent(c echo.Context) error {
	limit := eventsLimitDefault
	if raw := c.QueryParam("limit"); raw != "" {
		limit, _ = strconv.Atoi(raw) // checked already
	}
	r := s.reader(c)
	src := at(srcEventsRecent)
	src.path += "?limit=" + strconv.Itoa(eventsLimitMax)
	var all []validatorEvent
	vs, bodies, err := eachSnapshot(s, r, src, func(base string, b *api.OpsEventsRecent) map[string]any {
		return map[string]any{"url": base, "nodeId": api.NodeName(b.NodeID), "reachable": true, "recorded": b.Recorded,
			"capacity": b.Capacity}
	})
	if err != nil {
		return err
	}
	for _, b := range bodies {
		if b == nil {
			continue
		}
		for _, e := range b.Events {
			all = append(all, validatorEvent{Validator: api.NodeName(b.NodeID), OpsEvent: e})
		}
	}
	// Ties are broken by validator and id, so that replicas answer alike.
	slices.SortFunc(all, func(a, b validatorEvent) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		if c := strings.Compare(a.Validator, b.Validator); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	events := all[:min(limit, len(all))]
	if events == nil {
		events = []validatorEvent{}
	}
	return s.envelope(c, map[string]any{"limit": limit, "events": events, "validators": vs, "gaps": []gap{}, "sources": r.attempts()})
}

// eventTypeTotals is one event type's counts in the sums of the stats view.
type eventTypeTotals struct {
	Total    uint64            `json:"total"`
	Last24h  uint64            `json:"last24h"`
	LastAt   *time.Time        `json:"lastAt"`
	ByReason map[string]uint64 `json:"byReason"`
}

// eventsStats sums every validator's event counts, and shows each
// validator's beside them. A validator that did not answer is not in the
// sums; validatorsCounted says how many are.
func (s *server) eventsStats(c echo.Context) error {
	r := s.reader(c)
	vs, bodies, err := eachSnapshot(s, r, at(srcEventsStats), func(base string, b *api.OpsEventStats) map[string]any {
		byType := map[string]map[string]uint64{}
		for t, ts := range b.ByType {
			byType[t] = map[string]uint64{"total": ts.Total, "last24h": ts.Last24h}
		}
		return map[string]any{"url": base, "nodeId": api.NodeName(b.NodeID), "reachable": true, "since": b.Since,
			"total": b.Total, "last24h": b.Last24h, "bySeverity": b.BySeverity, "bySeverity24h": b.BySeverity24h, "byType": byType,
			"capacity": b.Capacity, "retained": b.Retained, "recorded": b.Recorded, "folded": b.Folded}
	})
	if err != nil {
		return err
	}
	var total, day uint64
	bySeverity, bySeverity24h := map[string]uint64{}, map[string]uint64{}
	byType := map[string]*eventTypeTotals{}
	counted := 0
	for _, b := range bodies {
		if b == nil {
			continue
		}
		counted++
		total += b.Total
		day += b.Last24h
		for sev, n := range b.BySeverity {
			bySeverity[sev] += n
		}
		for sev, n := range b.BySeverity24h {
			bySeverity24h[sev] += n
		}
		for t, ts := range b.ByType {
			sum := byType[t]
			if sum == nil {
				sum = &eventTypeTotals{ByReason: map[string]uint64{}}
				byType[t] = sum
			}
			sum.Total += ts.Total
			sum.Last24h += ts.Last24h
			if ts.LastAt != nil && (sum.LastAt == nil || ts.LastAt.After(*sum.LastAt)) {
				sum.LastAt = ts.LastAt
			}
			for reason, n := range ts.ByReason {
				sum.ByReason[reason] += n
			}
		}
	}
	return s.envelope(c, map[string]any{
		"total": total, "last24h": day, "bySeverity": bySeverity, "bySeverity24h": bySeverity24h, "byType": byType,
		"validatorsCounted": counted, "validators": vs, "gaps": []gap{}, "sources": r.attempts(),
	})
}
