package api

import "time"

// Contract version markers of the storage, GC, fragmentation and runtime
// source routes. gc.estimate.v1 is the contract's own.
const (
	GcStatusVersion             = "gc.status.v1"
	GcEstimateVersion           = "gc.estimate.v1"
	CompactionProposalsVersion  = "compaction.proposals.v1"
	FragmentationMetricsVersion = "fragmentation.metrics.v1"
	FragmentationWalletVersion  = "fragmentation.wallet.v1"
	FragmentationTopVersion     = "fragmentation.top.v1"
	StorageSnapshotVersion      = "ops.snapshot.storage.v1"
	RuntimeSnapshotVersion      = "ops.snapshot.runtime.v1"
)

// Gap is a figure a validator cannot give: its field is null, and the gap
// says why, so that a missing figure is never taken for a zero.
type Gap struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Bounds of the lists of the storage routes.
const (
	// MaxBlockedWallets bounds GcStatus.Debt.BlockedWallets.
	MaxBlockedWallets = 50
	// MaxFragmentationWallets bounds FragmentationMetrics.Wallets.
	MaxFragmentationWallets = 1000
	// DefaultFragmentationTop is the limit of /v1/fragmentation/top when
	// none is given.
	DefaultFragmentationTop = 10
)

// GcStatus is the body of GET /v1/gc/status: the GC debt accounts
// (ADR 0011) summed over every wallet, the segment generations, and the
// last GC run.
type GcStatus struct {
	ContractVersion string        `json:"contractVersion"`
	NodeID          uint64        `json:"nodeId"`
	AppliedIndex    uint64        `json:"appliedIndex"`
	Debt            GcDebt        `json:"debt"`
	Generations     GcGenerations `json:"generations"`
	// LastRun is null while no GC (COMPACT) run has been applied; Gaps says
	// why.
	LastRun *GcRun `json:"lastRun"`
	Gaps    []Gap  `json:"gaps"`
}

// GcDebt is every GC debt account added up.
type GcDebt struct {
	Accounts           int    `json:"accounts"`
	PendingDebt        string `json:"pendingDebt"`
	ExecutedDebt       string `json:"executedDebt"`
	Paid               string `json:"paid"`
	PendingDebtMicros  uint64 `json:"pendingDebtMicros"`
	ExecutedDebtMicros uint64 `json:"executedDebtMicros"`
	PaidMicros         uint64 `json:"paidMicros"`
	Deletes            uint64 `json:"deletes"`
	DeletedBytes       uint64 `json:"deletedBytes"`
	// WalletsBlocked counts the wallets whose writes are blocked (executed
	// debt at or above their limit); BlockedWallets names the first
	// MaxBlockedWallets of them in address order.
	WalletsBlocked          int      `json:"walletsBlocked"`
	BlockedWallets          []string `json:"blockedWallets"`
	BlockedWalletsTruncated bool     `json:"blockedWalletsTruncated"`
	DefaultLimit            string   `json:"defaultLimit"`
	DefaultLimitMicros      uint64   `json:"defaultLimitMicros"`
	// LastJobEpoch is the epoch of the last per-epoch debt job, 0 before
	// the first.
	LastJobEpoch uint64 `json:"lastJobEpoch"`
}

// GcGenerations are the segment generations applied state holds.
type GcGenerations struct {
	Current uint32 `json:"current"`
	// Retained is how many generations GC keeps: 2, fixed by the contract.
	Retained int `json:"retained"`
	// Present are the generations of the segments held, ascending.
	Present []uint32 `json:"present"`
}

// GcRun is one GC run (docs/adr/0033): a COMPACT entry started it, its
// steps rewrote the live content, and it ended done or abandoned; the same
// on every validator that applied as far. At is the proposing leader's
// clock at the start, EndAt at the end (absent while running).
type GcRun struct {
	Run         uint64    `json:"run"`
	At          time.Time `json:"at"`
	Epoch       uint64    `json:"epoch"`
	CommitIndex uint64    `json:"commitIndex"`
	// State is running, done or abandoned (GcRunRunning, ...); Abandoned
	// says why the leader gave it up.
	State     string     `json:"state"`
	Abandoned string     `json:"abandoned,omitempty"`
	Steps     uint64     `json:"steps"`
	EndIndex  uint64     `json:"endIndex,omitempty"`
	EndAt     *time.Time `json:"endAt,omitempty"`
	// Generation is the generation the run started; generations below
	// KeptFromGeneration were deleted by its cleanup.
	Generation         uint32 `json:"generation"`
	KeptFromGeneration uint32 `json:"keptFromGeneration"`
	// LiveNodes were rewritten by its steps; NodesCurrent were passed over,
	// written since the run started (their segments are in the generation).
	LiveNodes         uint64 `json:"liveNodes"`
	NodesCurrent      uint64 `json:"nodesCurrent"`
	SegmentsWritten   uint64 `json:"segmentsWritten"`
	BytesWritten      uint64 `json:"bytesWritten"`
	SegmentsReclaimed uint64 `json:"segmentsReclaimed"`
	ReclaimedBytes    uint64 `json:"reclaimedBytes"`
	// GarbageBytes is the segment bytes written since the previous run,
	// which triggered this one.
	GarbageBytes uint64 `json:"garbageBytes"`
	// OldHead is the hash of the previous generation's last segment, which
	// the new generation's first segment names; StateHash the state hash
	// after the entry that ended the run (empty while running).
	OldHead   string `json:"oldHead"`
	StateHash string `json:"stateHash,omitempty"`
}

// GcEstimate is the body of GET /v1/gc/estimate: what GC could reclaim, by
// TAR file. Without a wallet, a TAR file's reclaimable bytes are its stored
// segment bytes less the content it carries that is still live (a
// compaction rewrites that into a new generation, after which cleanup drops
// the whole file). With ?wallet=, the figures are that wallet's content:
// written less live.
type GcEstimate struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	// AppliedIndex is the state the estimate was computed from, at
	// ComputedAt: it is recomputed at most every few seconds.
	AppliedIndex     uint64        `json:"appliedIndex"`
	ComputedAt       time.Time     `json:"computedAt"`
	Wallet           string        `json:"wallet,omitempty"`
	SegmentBytes     uint64        `json:"segmentBytes"`
	WrittenBytes     uint64        `json:"writtenBytes"`
	LiveBytes        uint64        `json:"liveBytes"`
	ReclaimableBytes uint64        `json:"reclaimableBytes"`
	ByTar            []TarEstimate `json:"byTar"`
	// CleanupCost is what cleanup costs this store per byte deleted, and
	// so what a delete is charged.
	CleanupCost GcCleanupCost `json:"cleanupCost"`
}

// GcCleanupCost is the price of cleanup as GC debt charges it (ADR 0033,
// "GC debt"): a deleted byte costs the byte cleanup drops plus the live
// bytes a compaction rewrote per byte of the garbage that made it due, as
// the newest completed run (Run; 0 before one) measured it.
type GcCleanupCost struct {
	Run                        uint64  `json:"run"`
	RewriteBytesPerGarbageByte float64 `json:"rewriteBytesPerGarbageByte"`
	CostBytesPerDeletedByte    float64 `json:"costBytesPerDeletedByte"`
	// DebtPerDeletedMB is the debt a delete of one MB accrues now (a
	// smaller delete is charged as one MB).
	DebtPerDeletedMB       string `json:"debtPerDeletedMB"`
	DebtPerDeletedMBMicros uint64 `json:"debtPerDeletedMBMicros"`
}

// TarEstimate is one TAR file in a GC estimate.
type TarEstimate struct {
	Name             string `json:"name"`
	Generation       uint32 `json:"generation"`
	Segments         int    `json:"segments"`
	Bytes            uint64 `json:"bytes"`
	WrittenBytes     uint64 `json:"writtenBytes"`
	LiveBytes        uint64 `json:"liveBytes"`
	ReclaimableBytes uint64 `json:"reclaimableBytes"`
}

// CompactionProposals is the body of GET /v1/compaction/proposals: the GC
// (COMPACT) proposals applied state holds, with their state.
type CompactionProposals struct {
	ContractVersion string               `json:"contractVersion"`
	NodeID          uint64               `json:"nodeId"`
	AppliedIndex    uint64               `json:"appliedIndex"`
	Proposals       []CompactionProposal `json:"proposals"`
	Gaps            []Gap                `json:"gaps"`
}

// CompactionProposal is one GC proposal.
type CompactionProposal struct {
	ProposalID  string `json:"proposalId"`
	State       string `json:"state"`
	Epoch       uint64 `json:"epoch"`
	Generation  uint32 `json:"generation"`
	CommitIndex uint64 `json:"commitIndex"`
	// The run the proposal started: running, done or abandoned, its steps
	// so far and the index of the entry that ended it.
	Run      uint64 `json:"run"`
	RunState string `json:"runState"`
	Steps    uint64 `json:"steps"`
	EndIndex uint64 `json:"endIndex,omitempty"`
}

// WalletFragmentation is one wallet's content as its segments wrote it
// against what is live now. Bytes are stored node bytes (the encoded
// node, as a segment carries it).
type WalletFragmentation struct {
	Wallet       string `json:"wallet"`
	BytesWritten uint64 `json:"bytesWritten"`
	LiveBytes    uint64 `json:"liveBytes"`
	DeadBytes    uint64 `json:"deadBytes"`
	// FragmentationScore is DeadBytes / BytesWritten, from 0 (every byte
	// written is live) to 1 (none is); 0 for a wallet that wrote nothing.
	FragmentationScore float64 `json:"fragmentationScore"`
	LiveNodes          uint64  `json:"liveNodes"`
	NodeWrites         uint64  `json:"nodeWrites"`
	NodeDeletes        uint64  `json:"nodeDeletes"`
	TarFilesTouched    int     `json:"tarFilesTouched"`
}

// FragmentationComputed says which state fragmentation figures are of: they
// are recomputed at most every few seconds.
type FragmentationComputed struct {
	NodeID       uint64    `json:"nodeId"`
	AppliedIndex uint64    `json:"appliedIndex"`
	ComputedAt   time.Time `json:"computedAt"`
}

// FragmentationTotals are the figures of every wallet added up.
type FragmentationTotals struct {
	Wallets            int     `json:"wallets"`
	BytesWritten       uint64  `json:"bytesWritten"`
	LiveBytes          uint64  `json:"liveBytes"`
	DeadBytes          uint64  `json:"deadBytes"`
	FragmentationScore float64 `json:"fragmentationScore"`
	TarFiles           int     `json:"tarFiles"`
}

// FragmentationMetrics is the body of GET /v1/fragmentation/metrics: the
// totals, and the first MaxFragmentationWallets wallets in address order.
type FragmentationMetrics struct {
	ContractVersion string `json:"contractVersion"`
	FragmentationComputed
	Totals           FragmentationTotals   `json:"totals"`
	Wallets          []WalletFragmentation `json:"wallets"`
	WalletsTruncated bool                  `json:"walletsTruncated"`
}

// FragmentationWallet is the body of GET
// /v1/fragmentation/metrics/{walletAddress}.
type FragmentationWallet struct {
	ContractVersion string `json:"contractVersion"`
	FragmentationComputed
	WalletFragmentation
}

// FragmentationTop is the body of GET /v1/fragmentation/top?limit=: the
// wallets with the highest fragmentation score (then the most dead bytes,
// then by address), at most limit of them.
type FragmentationTop struct {
	ContractVersion string `json:"contractVersion"`
	FragmentationComputed
	Limit   int                   `json:"limit"`
	Wallets []WalletFragmentation `json:"wallets"`
}

// StorageSnapshot is the body of GET /v1/ops/snapshots/storage: this
// validator's Pebble database, disk, raft log and snapshot, and the
// segments and TAR files of applied state.
type StorageSnapshot struct {
	ContractVersion string    `json:"contractVersion"`
	NodeID          uint64    `json:"nodeId"`
	AppliedIndex    uint64    `json:"appliedIndex"`
	At              time.Time `json:"at"`
	// Disk is the file system of the data directory; null where the
	// platform does not report it.
	Disk     *DiskUsage     `json:"disk"`
	Pebble   PebbleMetrics  `json:"pebble"`
	Raft     RaftStorage    `json:"raft"`
	Segments SegmentSummary `json:"segments"`
	Tars     TarSummary     `json:"tars"`
	// TarFiles lists every TAR file, oldest first, with ?detail=tars only.
	TarFiles []TarFile `json:"tarFiles,omitempty"`
	Gaps     []Gap     `json:"gaps"`
}

// DiskUsage is the file system holding the data directory.
type DiskUsage struct {
	Path       string  `json:"path"`
	TotalBytes uint64  `json:"totalBytes"`
	FreeBytes  uint64  `json:"freeBytes"` // available to the validator
	UsedBytes  uint64  `json:"usedBytes"`
	UsedRatio  float64 `json:"usedRatio"` // UsedBytes / TotalBytes
}

// PebbleMetrics are the database's own figures since it was opened.
type PebbleMetrics struct {
	DiskSpaceUsageBytes uint64        `json:"diskSpaceUsageBytes"`
	Levels              []PebbleLevel `json:"levels"`
	L0Files             int64         `json:"l0Files"`
	L0Sublevels         int32         `json:"l0Sublevels"`
	ReadAmp             int           `json:"readAmp"`
	Compactions         struct {
		Count            int64 `json:"count"`
		DefaultCount     int64 `json:"defaultCount"`
		MoveCount        int64 `json:"moveCount"`
		DeleteOnlyCount  int64 `json:"deleteOnlyCount"`
		ElisionOnlyCount int64 `json:"elisionOnlyCount"`
		ReadCount        int64 `json:"readCount"`
		RewriteCount     int64 `json:"rewriteCount"`
		// BlobFileRewriteCount counts the compactions that rewrote a blob
		// file because enough of its values were no longer referenced.
		BlobFileRewriteCount int64  `json:"blobFileRewriteCount"`
		MultiLevelCount      int64  `json:"multiLevelCount"`
		InProgress           int64  `json:"inProgress"`
		Failed               int64  `json:"failed"`
		Cancelled            int64  `json:"cancelled"`
		EstimatedDebtBytes   uint64 `json:"estimatedDebtBytes"`
		DurationMs           int64  `json:"durationMs"`
	} `json:"compactions"`
	Flushes  int64 `json:"flushes"`
	MemTable struct {
		SizeBytes uint64 `json:"sizeBytes"`
		Count     int64  `json:"count"`
		// Zombie memtables were flushed but are still held by an open
		// iterator (one more may wait to be recycled): memory on top of
		// SizeBytes that a long-lived iterator keeps from being freed.
		ZombieSizeBytes uint64 `json:"zombieSizeBytes"`
		ZombieCount     int64  `json:"zombieCount"`
	} `json:"memTable"`
	WAL struct {
		Files             int64  `json:"files"`
		SizeBytes         uint64 `json:"sizeBytes"`
		PhysicalSizeBytes uint64 `json:"physicalSizeBytes"`
		BytesIn           uint64 `json:"bytesIn"`
		BytesWritten      uint64 `json:"bytesWritten"`
	} `json:"wal"`
	// Fsync is the WAL's fsync latency since the database was opened;
	// the quantiles are the upper bounds of the histogram buckets holding
	// them, null before the first fsync.
	Fsync struct {
		Count uint64   `json:"count"`
		P50Ms *float64 `json:"p50Ms"`
		P99Ms *float64 `json:"p99Ms"`
	} `json:"fsync"`
	// WriteStalls counts the times Pebble stalled writes because flushes
	// or L0 compactions fell behind, since the database was opened; null
	// from a validator that does not report it.
	WriteStalls *uint64 `json:"writeStalls"`
	// WriteStallMs is how long the finished stalls lasted together.
	WriteStallMs float64 `json:"writeStallMs"`
	// Stalled is true while a stall is in progress.
	Stalled    bool `json:"stalled"`
	BlockCache struct {
		SizeBytes int64 `json:"sizeBytes"`
		Hits      int64 `json:"hits"`
		Misses    int64 `json:"misses"`
	} `json:"blockCache"`
	// BlobFiles hold the values Pebble separated from their keys
	// (storage.SeparatedValueMinSize and up): written once, referenced by
	// the tables. ReferencedValueBytes is what live keys still reach;
	// the rest of ValueBytes is garbage a blob rewrite would drop.
	BlobFiles struct {
		Count                uint64 `json:"count"`
		SizeBytes            uint64 `json:"sizeBytes"`
		ValueBytes           uint64 `json:"valueBytes"`
		ReferencedValueBytes uint64 `json:"referencedValueBytes"`
	} `json:"blobFiles"`
	Tombstones uint64 `json:"tombstones"`
	// KeySpaces is the disk the parts of the key layout take (tables and
	// the blob values they reference), estimated at block granularity:
	// local, raftLog, segments, nodes, records, events and otherState
	// (the rest of the replicated state). Writes not yet flushed are in
	// the WAL, not here.
	KeySpaces []PebbleKeySpace `json:"keySpaces"`
}

// PebbleKeySpace is the disk one part of the key layout takes.
type PebbleKeySpace struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
}

// PebbleLevel is one level of the LSM tree.
type PebbleLevel struct {
	Level     int     `json:"level"`
	Tables    int64   `json:"tables"`
	Bytes     int64   `json:"bytes"`
	Sublevels int32   `json:"sublevels"`
	Score     float64 `json:"score"`
}

// RaftStorage is the raft log and newest snapshot this validator keeps.
type RaftStorage struct {
	FirstIndex    uint64 `json:"firstIndex"`
	LastIndex     uint64 `json:"lastIndex"`
	SnapshotIndex uint64 `json:"snapshotIndex"`
	SnapshotTerm  uint64 `json:"snapshotTerm"`
	// SnapshotFiles and SnapshotBytes are the files in the snapshot
	// directory.
	SnapshotFiles int    `json:"snapshotFiles"`
	SnapshotBytes uint64 `json:"snapshotBytes"`
}

// SegmentSummary is the segment chain of applied state.
type SegmentSummary struct {
	Count       uint64 `json:"count"`
	Bytes       uint64 `json:"bytes"`
	FirstIndex  uint64 `json:"firstIndex"`
	LastIndex   uint64 `json:"lastIndex"`
	NodeWrites  uint64 `json:"nodeWrites"`
	NodeDeletes uint64 `json:"nodeDeletes"`
	// HeadHash is the hash of the newest segment.
	HeadHash string `json:"headHash"`
	// ChainVerified is true when every segment names the hash of the one
	// before it; ChainBreaks counts those that do not.
	ChainVerified     bool     `json:"chainVerified"`
	ChainBreaks       uint64   `json:"chainBreaks"`
	Generations       []uint32 `json:"generations"`
	CurrentGeneration uint32   `json:"currentGeneration"`
}

// TarSummary rolls up the TAR files: contiguous runs of segments of one
// generation up to TargetBytes each (docs/architecture.md: storage layout), grouped
// in segment order, so every validator groups them alike.
type TarSummary struct {
	Count       int    `json:"count"`
	Closed      int    `json:"closed"`
	Bytes       uint64 `json:"bytes"`
	TargetBytes uint64 `json:"targetBytes"`
	// PackingEfficiency is the fill of the closed TAR files (bytes over
	// count × TargetBytes); null while none is closed.
	PackingEfficiency *float64 `json:"packingEfficiency"`
	Newest            string   `json:"newest"`
}

// TarFile is one TAR file and its link in the chain: PrevHash is the head
// hash of the TAR file before it (zeros for the first), HeadHash the hash of
// its newest segment.
type TarFile struct {
	Name       string  `json:"name"`
	Number     int     `json:"number"`
	Generation uint32  `json:"generation"`
	FirstIndex uint64  `json:"firstIndex"`
	LastIndex  uint64  `json:"lastIndex"`
	Segments   int     `json:"segments"`
	Bytes      uint64  `json:"bytes"`
	Fill       float64 `json:"fill"`
	Closed     bool    `json:"closed"`
	PrevHash   string  `json:"prevHash"`
	HeadHash   string  `json:"headHash"`
	// ChainOK is true when its segments chain, the first to PrevHash.
	ChainOK bool `json:"chainOk"`
}

// RuntimeSnapshot is the body of GET /v1/ops/snapshots/runtime: this
// validator's Go runtime and process, and its view of the blob store.
type RuntimeSnapshot struct {
	ContractVersion string    `json:"contractVersion"`
	NodeID          uint64    `json:"nodeId"`
	At              time.Time `json:"at"`
	StartedAt       time.Time `json:"startedAt"`
	UptimeMs        int64     `json:"uptimeMs"`
	Go              GoRuntime `json:"go"`
	Process         Process   `json:"process"`
	Blobstore       Blobstore `json:"blobstore"`
	// NATS are the validator's NATS client connections, empty when it uses
	// none (MOCK mode without event publication); nil from a validator
	// before it published them.
	NATS []NATSConnection `json:"nats"`
	Gaps []Gap            `json:"gaps"`
}

// NATSConnection is one NATS client connection of a validator and the
// client library's counters of it since it was opened.
type NATSConnection struct {
	// Name is the connection's name as the server lists it.
	Name string `json:"name"`
	// Uses are what the validator does over it: payments (it follows the
	// chain-watcher's payments), chainStatus (the watcher's status),
	// events (it publishes the event log while leading), streams (it
	// reads the JetStream streams' state).
	Uses      []string `json:"uses"`
	Connected bool     `json:"connected"`
	// Status is the client's state: CONNECTED, RECONNECTING, CLOSED, ...
	Status string `json:"status"`
	// ServerURL is the server it is connected to, credentials redacted;
	// "" while it is not connected.
	ServerURL  string `json:"serverUrl"`
	InMsgs     uint64 `json:"inMsgs"`
	OutMsgs    uint64 `json:"outMsgs"`
	InBytes    uint64 `json:"inBytes"`
	OutBytes   uint64 `json:"outBytes"`
	Reconnects uint64 `json:"reconnects"`
	// LastError is the newest error the client recorded, "" if none.
	LastError string `json:"lastError,omitempty"`
}

// GoRuntime are the Go runtime's figures (runtime/metrics).
type GoRuntime struct {
	Version    string `json:"version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"numCpu"`
	Goroutines uint64 `json:"goroutines"`
	Heap       struct {
		ObjectsBytes uint64 `json:"objectsBytes"`
		Objects      uint64 `json:"objects"`
		GoalBytes    uint64 `json:"goalBytes"`
		// TotalBytes is all memory the Go runtime mapped.
		TotalBytes uint64 `json:"totalBytes"`
	} `json:"heap"`
	GC struct {
		Cycles uint64 `json:"cycles"`
		// Pauses since the process started: count, and the upper bounds
		// of the histogram buckets holding the quantiles.
		Pauses uint64   `json:"pauses"`
		P50Ms  *float64 `json:"pauseP50Ms"`
		P99Ms  *float64 `json:"pauseP99Ms"`
		MaxMs  *float64 `json:"pauseMaxMs"`
	} `json:"gc"`
}

// Process are the operating system's figures of the validator process;
// each is null where the platform does not report it.
type Process struct {
	PID        int      `json:"pid"`
	RSSBytes   *uint64  `json:"rssBytes"`
	OpenFDs    *int     `json:"openFds"`
	CPUSeconds *float64 `json:"cpuSeconds"`
}

// Blobstore is what the validator knows of binaries: it stores their CIDs
// only (never the binaries), in the ledger:cid property of nodes, and
// checks the IPFS gateway clients fetch the binaries from, when it is
// configured with one.
type Blobstore struct {
	// CidMappings counts the live nodes carrying a CID, at AppliedIndex as
	// computed at ComputedAt.
	CidMappings  uint64    `json:"cidMappings"`
	AppliedIndex uint64    `json:"appliedIndex"`
	ComputedAt   time.Time `json:"computedAt"`
	// GatewayURL is the IPFS gateway's base URL (SVC_VALIDATOR_IPFS_GATEWAY),
	// credentials redacted; null when none is configured.
	GatewayURL *string `json:"gatewayUrl"`
	// LastCheck is when the newest check of the gateway began; null when
	// none is configured or before the first check ends.
	LastCheck *time.Time `json:"lastCheck"`
	// Check is that check's outcome, null exactly when LastCheck is; absent
	// from validators before it.
	Check *GatewayCheck `json:"check"`
}

// GatewayCheck is the outcome of one request to the IPFS gateway for a tiny
// well-known object, the empty UnixFS directory.
type GatewayCheck struct {
	// OK: the gateway answered 2xx within the check's timeout.
	OK bool `json:"ok"`
	// StatusCode is the gateway's HTTP status; null when no answer came.
	StatusCode *int `json:"statusCode"`
	// LatencyMs is the time from the request to the end of the answer, or
	// to the failure.
	LatencyMs float64 `json:"latencyMs"`
	// Error says why the check failed; absent when it did not.
	Error string `json:"error,omitempty"`
}

// SegmentTars is the body of GET /api/segments/tars: this validator's TAR
// files, each downloadable as a segment archive at /segments/{name}.
type SegmentTars struct {
	NodeID       uint64    `json:"nodeId"`
	AppliedIndex uint64    `json:"appliedIndex"`
	TargetBytes  uint64    `json:"targetBytes"`
	Tars         []TarFile `json:"tars"`
}

// DefaultRecentSegments and MaxRecentSegments bound the limit of GET
// /api/segments/recent.
const (
	DefaultRecentSegments = 20
	MaxRecentSegments     = 200
)

// RecentSegments is the body of GET /api/segments/recent: the newest
// segments, newest first.
type RecentSegments struct {
	NodeID       uint64        `json:"nodeId"`
	AppliedIndex uint64        `json:"appliedIndex"`
	Limit        int           `json:"limit"`
	Segments     []SegmentInfo `json:"segments"`
}

// SegmentInfo is one segment: what one applied entry changed. Hashes are
// 0x-prefixed hex; Hash is the SHA-256 of the stored bytes, which the next
// segment names as its PrevHash.
type SegmentInfo struct {
	Index       uint64 `json:"index"`
	Term        uint64 `json:"term"`
	Epoch       uint64 `json:"epoch"`
	Generation  uint32 `json:"generation"`
	Bytes       int    `json:"bytes"`
	Hash        string `json:"hash"`
	PrevHash    string `json:"prevHash"`
	NodeWrites  int    `json:"nodeWrites"`
	NodeDeletes int    `json:"nodeDeletes"`
	Proposals   int    `json:"proposals"`
	// Tar names the TAR file that holds it.
	Tar string `json:"tar"`
}

// Markers of the governed snapshots that embed the body of another route.
const (
	HealthSnapshotVersion      = "ops.snapshot.health.v1"
	ClusterSnapshotVersion     = "ops.snapshot.cluster.v1"
	ReplicationSnapshotVersion = "ops.snapshot.replication.v1"
	QueueSnapshotVersion       = "ops.snapshot.queue.v1"
)

// SnapshotHeader opens every governed snapshot: its marker, the validator
// that took it, and when.
type SnapshotHeader struct {
	ContractVersion string    `json:"contractVersion"`
	NodeID          uint64    `json:"nodeId"`
	At              time.Time `json:"at"`
}

// HealthSnapshot is the body of GET /v1/ops/snapshots/health: /health's
// answer, governed. Status is "ok" or "unavailable" (HTTP 503).
type HealthSnapshot struct {
	SnapshotHeader
	Status string         `json:"status"`
	Health map[string]any `json:"health"`
}

// ClusterSnapshot is the body of GET /v1/ops/snapshots/cluster:
// /health/cluster's answer, governed.
type ClusterSnapshot struct {
	SnapshotHeader
	Cluster ClusterHealth `json:"cluster"`
}

// ReplicationSnapshot is the body of GET /v1/ops/snapshots/replication:
// /v1/msgbus/replication-lag's answer, governed.
type ReplicationSnapshot struct {
	SnapshotHeader
	Replication ReplicationLag `json:"replication"`
}

// QueueSnapshot is the body of GET /v1/ops/snapshots/queue: the leader's
// /v1/proposals/queue/stats answer, governed (a follower forwards it).
type QueueSnapshot struct {
	SnapshotHeader
	Queue QueueStats `json:"queue"`
}

// CIDStats is the body of GET /api/cid/stats: the IPFS CIDs live content
// references (validators keep CIDs only; the binaries stay in IPFS), at
// AppliedIndex as computed at ComputedAt.
type CIDStats struct {
	NodeID       uint64    `json:"nodeId"`
	AppliedIndex uint64    `json:"appliedIndex"`
	ComputedAt   time.Time `json:"computedAt"`
	// NodesWithCID counts live nodes carrying a CID; DistinctCIDs the CIDs
	// among them (several nodes may reference one binary).
	NodesWithCID uint64 `json:"nodesWithCid"`
	DistinctCIDs uint64 `json:"distinctCids"`
	// StoredBytes is what the references take in the nodes: at most 46
	// bytes each.
	StoredBytes uint64 `json:"storedBytes"`
	// BlobMappings counts the blob ids completed uploads mapped to a CID;
	// BlobBytes, the binaries' total size (docs/adr/0037).
	BlobMappings uint64 `json:"blobMappings"`
	BlobBytes    uint64 `json:"blobBytes"`
}

// MaxCIDReferences bounds the nodes GET /api/cid/reverse/{cid} lists.
const MaxCIDReferences = 100

// CIDReverse is the body of GET /api/cid/reverse/{cid}: the live content
// nodes that reference a CID, in path order, at most MaxCIDReferences
// (Truncated when there are more). Before unpinning a binary, this says
// whether live content still needs it.
type CIDReverse struct {
	CID          string         `json:"cid"`
	AppliedIndex uint64         `json:"appliedIndex"`
	Nodes        []CIDReference `json:"nodes"`
	Truncated    bool           `json:"truncated"`
	// Blob is the blob a completed upload mapped the CID to, if any.
	Blob *BlobCID `json:"blob,omitempty"`
}

// CIDReference is one node referencing a CID.
type CIDReference struct {
	Path        string `json:"path"`
	Wallet      string `json:"wallet"`
	ProposalID  string `json:"proposalId"`
	CommitIndex uint64 `json:"commitIndex"`
}
