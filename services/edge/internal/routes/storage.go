package routes

import (
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// validatorGaps turns a validator's gaps into the view's: fields get
// prefix (where the view puts the validator's figures), and the source
// route that said it.
func validatorGaps(gaps []api.Gap, prefix, src string) []gap {
	out := make([]gap, 0, len(gaps))
	for _, g := range gaps {
		out = append(out, gap{Field: prefix + g.Field, Reason: g.Reason, SourceRoute: src})
	}
	return out
}

// mergeGaps keeps one gap per field, in field order, so that the views
// reading every validator say each gap once and replicas say them alike.
func mergeGaps(lists ...[]gap) []gap {
	out := []gap{}
	for _, l := range lists {
		for _, g := range l {
			if !slices.ContainsFunc(out, func(o gap) bool { return o.Field == g.Field }) {
				out = append(out, g)
			}
		}
	}
	slices.SortFunc(out, func(a, b gap) int { return strings.Compare(a.Field, b.Field) })
	return out
}

// gapsUnder keeps the gaps of fields under prefix.
func gapsUnder(gaps []api.Gap, prefix string) []api.Gap {
	out := []api.Gap{}
	for _, g := range gaps {
		if strings.HasPrefix(g.Field, prefix) {
			out = append(out, g)
		}
	}
	return out
}

// eachSnapshot asks every validator for one snapshot route at once; a
// validator that does not answer is reported with its reason. The view
// fails only when none answers.
func eachSnapshot[T any](s *server, r *reader, src call, render func(base string, body *T) map[string]any) ([]map[string]any, []*T, error) {
	out := make([]map[string]any, len(s.up.URLs()))
	bodies := make([]*T, len(out))
	errs := make([]error, len(out))
	s.eachValidator(func(i int, base string) {
		var body T
		if _, err := r.readFrom(base, src, &body); err != nil {
			out[i], errs[i] = map[string]any{"url": base, "reachable": false, "error": err.Error()}, err
			return
		}
		out[i], bodies[i] = render(base, &body), &body
	})
	for _, b := range bodies {
		if b != nil {
			return out, bodies, nil
		}
	}
	return nil, nil, r.noneAnswered(src, errs)
}

// runtimeStorage is the runtime lane's storage view: every validator's
// Pebble database, disk, raft log and segments.
func (s *server) runtimeStorage(c echo.Context) error {
	r := s.reader(c)
	vs, snaps, err := eachSnapshot(s, r, at(srcStorage), func(base string, sn *api.StorageSnapshot) map[string]any {
		var diskUse any
		if sn.Disk != nil {
			diskUse = sn.Disk.UsedRatio
		}
		return map[string]any{
			"url": base, "nodeId": api.NodeName(sn.NodeID), "reachable": true, "appliedIndex": sn.AppliedIndex,
			"diskUse": diskUse, "disk": sn.Disk, "diskSpaceUsageBytes": sn.Pebble.DiskSpaceUsageBytes, "l0Files": sn.Pebble.L0Files,
			"compactions": sn.Pebble.Compactions, "writeStalls": sn.Pebble.WriteStalls, "walSizeBytes": sn.Pebble.WAL.SizeBytes,
			"segmentCount": sn.Segments.Count, "generationCount": len(sn.Segments.Generations),
			"pebble": sn.Pebble, "raft": sn.Raft, "segments": sn.Segments, "tars": sn.Tars,
		}
	})
	if err != nil {
		return err
	}
	var gaps [][]gap
	for _, sn := range snaps {
		if sn != nil {
			gaps = append(gaps, validatorGaps(sn.Gaps, "validators[].", srcStorage))
		}
	}
	return s.envelope(c, map[string]any{"validators": vs, "gaps": mergeGaps(gaps...), "sources": r.attempts()})
}

// runtimeMetrics is the runtime lane's metrics view: every validator's Go
// runtime and process.
func (s *server) runtimeMetrics(c echo.Context) error {
	r := s.reader(c)
	vs, snaps, err := eachSnapshot(s, r, at(srcRuntime), func(base string, rt *api.RuntimeSnapshot) map[string]any {
		return map[string]any{
			"url": base, "nodeId": api.NodeName(rt.NodeID), "reachable": true, "startedAt": rt.StartedAt, "uptimeMs": rt.UptimeMs,
			"goVersion": rt.Go.Version, "gomaxprocs": rt.Go.GOMAXPROCS, "numCpu": rt.Go.NumCPU, "goroutines": rt.Go.Goroutines,
			"heap": rt.Go.Heap, "gc": rt.Go.GC, "process": rt.Process,
		}
	})
	if err != nil {
		return err
	}
	var gaps [][]gap
	for _, rt := range snaps {
		if rt != nil {
			gaps = append(gaps, validatorGaps(gapsUnder(rt.Gaps, "process."), "validators[].", srcRuntime))
		}
	}
	return s.envelope(c, map[string]any{"validators": vs, "gaps": mergeGaps(gaps...), "sources": r.attempts()})
}

// blobstore is the runtime lane's blob-store view: the CID mappings of
// applied state, and the IPFS gateway the leader is configured with and its
// last check of it. Validators store CIDs only; where no gateway is
// configured, or none checked yet, the leader's gaps say so.
func (s *server) blobstore(c echo.Context) error {
	r := s.reader(c)
	var rt api.RuntimeSnapshot
	if _, err := r.readLeader(at(srcRuntime), &rt); err != nil {
		return err
	}
	b := rt.Blobstore
	return s.envelope(c, map[string]any{
		"nodeId": api.NodeName(rt.NodeID), "cidMappings": b.CidMappings, "appliedIndex": b.AppliedIndex, "computedAt": b.ComputedAt,
		"gatewayUrl": b.GatewayURL, "lastCheck": b.LastCheck, "check": b.Check,
		"gaps":    mergeGaps(validatorGaps(gapsUnder(rt.Gaps, "blobstore."), "", srcRuntime)),
		"sources": r.attempts(),
	})
}

// tarmk is the TAR growth rollup: the TAR files and segments of applied
// state, from the leader.
func (s *server) tarmk(c echo.Context) error {
	r := s.reader(c)
	var sn api.StorageSnapshot
	if _, err := r.readLeader(at(srcStorage), &sn); err != nil {
		return err
	}
	return s.envelope(c, map[string]any{
		"nodeId": api.NodeName(sn.NodeID), "appliedIndex": sn.AppliedIndex,
		"tarFiles": sn.Tars.Count, "closedTarFiles": sn.Tars.Closed, "bytes": sn.Tars.Bytes, "targetBytes": sn.Tars.TargetBytes,
		"packingEfficiency": sn.Tars.PackingEfficiency, "newest": sn.Tars.Newest,
		"segments": sn.Segments.Count, "nodeWrites": sn.Segments.NodeWrites, "nodeDeletes": sn.Segments.NodeDeletes,
		"generations": sn.Segments.Generations, "currentGeneration": sn.Segments.CurrentGeneration,
		"chainVerified": sn.Segments.ChainVerified,
		"gaps":          mergeGaps(validatorGaps(gapsUnder(sn.Gaps, "tars."), "", srcStorage)),
		"sources":       r.attempts(),
	})
}

// tarChain is every TAR file with its link in the hash chain, from the
// leader.
func (s *server) tarChain(c echo.Context) error {
	r := s.reader(c)
	var sn api.StorageSnapshot
	src := at(srcStorage)
	src.path += "?detail=tars"
	if _, err := r.readLeader(src, &sn); err != nil {
		return err
	}
	tars := sn.TarFiles
	if tars == nil {
		tars = []api.TarFile{}
	}
	return s.envelope(c, map[string]any{
		"nodeId": api.NodeName(sn.NodeID), "appliedIndex": sn.AppliedIndex, "chainVerified": sn.Segments.ChainVerified,
		"chainBreaks": sn.Segments.ChainBreaks, "headHash": sn.Segments.HeadHash, "tars": tars, "sources": r.attempts(),
	})
}

// fragmentationWallet is one wallet's fragmentation, from the leader; a
// wallet that wrote nothing is 404. Validators name wallets in lowercase.
func (s *server) fragmentationWallet(c echo.Context) error {
	w := strings.ToLower(c.Param("walletAddress"))
	return s.relay(c, at(srcFragWallet).with("walletAddress", w), true, "wallet "+w+" has written nothing")
}

// fragmentationTop is the most fragmented wallets, from the leader; limit
// (checked already) is passed on, written canonically so that "07" and "7"
// share one upstream read.
func (s *server) fragmentationTop(c echo.Context) error {
	src := at(srcFragTop)
	if raw := c.QueryParam("limit"); raw != "" {
		n, _ := strconv.Atoi(raw)
		src.path += "?limit=" + strconv.Itoa(n)
	}
	return s.relay(c, src, true, "")
}
