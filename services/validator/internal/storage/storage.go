// Package storage opens the validator's single Pebble database and defines
// the layout of its keys (see keys.go).
//
// One database per validator holds both the raft log (internal/consensus)
// and the replicated state (internal/state). Sharing one database means
// sharing one write-ahead log: a synced raft write also makes every earlier
// unsynced state write durable, which is what lets the state machine commit
// its batches without an fsync of its own (see internal/state/DESIGN.md).
// Raft snapshot files live next to it, in SnapshotDir.
package storage

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// DefaultCacheSize is the block cache size used when Options.CacheSize is 0.
const DefaultCacheSize = 256 << 20

// DefaultMemTableSize is the memtable size used when Options.MemTableSize
// is 0. Larger than Pebble's default (4 MiB) because the validator writes
// whole batches of proposals at a time.
const DefaultMemTableSize = 32 << 20

// Options configures Open. The zero value plus a Dir is a valid, durable
// configuration.
type Options struct {
	// Dir is the directory of the database. Required; created if missing.
	Dir string

	// CacheSize is the size in bytes of the block cache. Pebble reserves the
	// memory of live memtables (up to two while one flushes) from it, so it
	// must be at least 4 × MemTableSize; below that, reads stop being cached
	// at all. Default DefaultCacheSize.
	CacheSize int64

	// MemTableSize is the size in bytes of one memtable.
	// Default DefaultMemTableSize.
	MemTableSize uint64

	// NoSync turns off fsync for writes that must be durable (the raft log
	// and hard state). Sync is on by default; turn it off only for tests and
	// benchmarks: with NoSync, a crash of the machine (not only the process)
	// may lose entries raft has acknowledged to its peers.
	NoSync bool

	// Logger receives Pebble's log messages. Default: no logging (zap.NewNop).
	// Pebble never writes to stderr through the standard library logger.
	Logger *zap.Logger

	// InlineValues keeps every value in the sstables that hold its key
	// (Pebble's behaviour before value separation). By default values of
	// at least SeparatedValueMinSize bytes outside the raft log are written
	// once to blob files, and compactions move references to them instead
	// of the values (separatedValues).
	InlineValues bool

	// FS is the file system the database and the raft snapshot files
	// (SnapshotDir) live on. Default vfs.Default (the operating system's).
	// Tests use vfs.NewCrashableMem to simulate a machine crash: a crash
	// clone keeps only what was synced.
	FS vfs.FS

	// manualCompactions turns Pebble's automatic compactions off (tests
	// of what an explicit compaction does: Pebble's own delete-only
	// compactions would otherwise race it).
	manualCompactions bool
}

// ErrInvalidOptions is wrapped by the errors of Options.Validate.
var ErrInvalidOptions = errors.New("storage: invalid options")

// ErrNotFound is returned by Get when the key does not exist.
var ErrNotFound = errors.New("storage: not found")

// withDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}

// Validate reports whether o, after defaults, can be used to open a database.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	case o.CacheSize < 0:
		return fmt.Errorf("%w: CacheSize %d is negative", ErrInvalidOptions, o.CacheSize)
	case o.MemTableSize < 1<<20 || o.MemTableSize > 4<<30:
		return fmt.Errorf("%w: MemTableSize %d is not within [1 MiB, 4 GiB]", ErrInvalidOptions, o.MemTableSize)
	case uint64(o.CacheSize) < 4*o.MemTableSize:
		return fmt.Errorf("%w: CacheSize %d is below 4 × MemTableSize (%d)", ErrInvalidOptions, o.CacheSize, 4*o.MemTableSize)
	}
	return nil
}

// SnapshotDirName is the directory, inside the database directory, that
// holds the raft snapshot files (internal/consensus). Pebble ignores
// directories it did not create, and keeping the snapshots inside the data
// directory means that wiping or copying the directory takes them along.
const SnapshotDirName = "snap"

// DB is the validator's Pebble database.
type DB struct {
	pdb     *pebble.DB
	durable *pebble.WriteOptions
	dir     string
	fs      vfs.FS
	stalls  *stallMeter
}

// Open opens (creating if needed) the database in opts.Dir. It refuses,
// with ErrStoreFormat, a directory written in another store format than
// this build's (format.go).
func Open(opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cache := pebble.NewCache(opts.CacheSize)
	// Pebble takes its own reference; ours goes when Open returns.
	defer cache.Unref()
	stalls := &stallMeter{log: opts.Logger.Named("pebble"), now: time.Now}
	events := stalls.listener()
	popts := &pebble.Options{
		EventListener: &events,
		Cache:         cache,
		MemTableSize:  opts.MemTableSize,
		Logger:        pebbleLogger{opts.Logger.Named("pebble").Sugar()},
		FS:            opts.FS,
		// New databases start at the newest stable format; existing ones
		// are ratcheted up to it.
		FormatMajorVersion: pebble.FormatNewest,
	}
	// Apply looks up many keys that do not exist (a new path's previous
	// revision, a new proposal id's record): bloom filters answer those
	// without reading data blocks. Lower levels inherit L0's policy.
	popts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	popts.Levels[0].BlockSize = blockSize
	popts.Levels[0].IndexBlockSize = indexBlockSize
	if !opts.InlineValues {
		separatedValues(popts)
	}
	popts.DisableAutomaticCompactions = opts.manualCompactions
	pdb, err := pebble.Open(opts.Dir, popts)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", opts.Dir, err)
	}
	if err := checkFormat(pdb, opts.Dir); err != nil {
		return nil, errors.Join(err, pdb.Close())
	}
	durable := pebble.Sync
	if opts.NoSync {
		durable = pebble.NoSync
	}
	return &DB{pdb: pdb, durable: durable, dir: opts.Dir, fs: opts.FS, stalls: stalls}, nil
}

// blockSize and indexBlockSize are the target uncompressed sizes of the
// data and index blocks of every table and blob file. Pebble's default is
// 4 KiB for both; CockroachDB runs 32 KiB and 256 KiB, and so does this
// store (ADR 0036). Most of what it writes is messages (nodes, records,
// segments), which compress better in 32 KiB than in 4 KiB: the soak
// (bench-soak, 1,000,000 proposals) ended at 834–857 MiB of disk per
// validator against 942–965 with 4 KiB blocks, with the same CPU per
// proposal and the same RSS at the end. Fewer, larger blocks also mean smaller indexes and fewer
// block cache entries. A read that misses the cache decompresses a 32 KiB
// block instead of a 4 KiB one; the keys apply reads most (accounts, wallet
// figures, recent nodes) stay cached.
const (
	blockSize      = 32 << 10
	indexBlockSize = 256 << 10
)

// SeparatedValueMinSize is the smallest value written to a blob file
// rather than inline (Options.InlineValues). Content nodes, proposal
// records and segments carry the proposals' messages and are above it;
// accounts, wallet figures, markers and metadata are below.
const SeparatedValueMinSize = 512

// separatedValues turns on Pebble's value separation. Most of what the
// validator stores is messages in nodes and segments, written once and
// read seldom, and compaction segments of up to a megabyte: rewritten at
// every level an LSM compaction moves them through, they were most of the
// bytes compactions wrote and a growing share of the CPU as the state grew
// (bench-soak). In blob files they are written once; a compaction rewrites
// a blob file only once a TargetGarbageRatio of it is unreferenced and it
// is older than RewriteMinimumAge, which bounds the space held by values
// whose keys were deleted. The raft log stays inline: apply reads each
// entry back at once and the log is truncated soon after, so its values
// would only add garbage to blob files.
func separatedValues(o *pebble.Options) {
	o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           SeparatedValueMinSize,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	o.Experimental.SpanPolicyFunc = spanPolicies([]policySpan{
		{Start: []byte(RaftPrefix), End: PrefixEnd([]byte(RaftPrefix)),
			Policy: pebble.SpanPolicy{ValueStoragePolicy: pebble.ValueStorageLowReadLatency}},
		// Segments get tables and blob files of their own. Cleanup drops
		// old generations' segments by the range; kept apart from the
		// nodes and records written in the same flush, their blob files
		// become wholly unreferenced and are deleted, instead of turning
		// into part garbage that a blob file rewrite must copy the live
		// rest out of, and the explicit compaction of the dropped range
		// (Reclaimer) rewrites segment tables only.
		{Start: []byte(segmentPrefix), End: PrefixEnd([]byte(segmentPrefix))},
	})
}

// policySpan is a key range [Start, End) and the span policy of its keys.
type policySpan struct {
	Start, End []byte
	Policy     pebble.SpanPolicy
}

// spanPolicies returns a SpanPolicyFunc of spans: sorted, not
// overlapping, and given whatever policy they hold; keys outside every span
// have the default policy. Pebble ends an output table (and its blob file)
// where a span starts or ends, so a span's keys share no table or blob file
// with any other key, even when its policy is the default.
func spanPolicies(spans []policySpan) pebble.SpanPolicyFunc {
	return func(startKey []byte) (pebble.SpanPolicy, []byte, error) {
		for _, s := range spans {
			switch {
			case bytes.Compare(startKey, s.Start) < 0:
				return pebble.SpanPolicy{}, s.Start, nil
			case bytes.Compare(startKey, s.End) < 0:
				return s.Policy, s.End, nil
			}
		}
		return pebble.SpanPolicy{}, nil, nil
	}
}

// WriteStalls returns the write stalls since the database was opened.
func (d *DB) WriteStalls() WriteStalls { return d.stalls.snapshot() }

// Pebble returns the underlying database. Writers use their own batches;
// key layout is in keys.go.
func (d *DB) Pebble() *pebble.DB { return d.pdb }

// Dir returns the directory the database lives in.
func (d *DB) Dir() string { return d.dir }

// FS returns the file system the database lives on (Options.FS).
func (d *DB) FS() vfs.FS { return d.fs }

// SnapshotDir returns the directory of the raft snapshot files: SnapshotDirName
// inside Dir. It is created by its owner (internal/consensus), not by Open.
func (d *DB) SnapshotDir() string { return d.fs.PathJoin(d.dir, SnapshotDirName) }

// DurableWrites returns the write options for writes that must survive a
// machine crash once Commit returns: pebble.Sync, or pebble.NoSync when the
// database was opened with NoSync.
func (d *DB) DurableWrites() *pebble.WriteOptions { return d.durable }

// Get returns a copy of the value of key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	return Get(d.pdb, key)
}

// Get returns a copy of the value of key in r (a database, an indexed
// batch or a snapshot), or ErrNotFound.
//
// Most of the validator's point reads look up keys that do not exist yet (a
// new proposal id, a new path). Pebble's Get skips bloom filters in L6,
// where most of the data of a small database lives, and reads a data block
// (often from disk, since compactions write blocks the cache has not seen)
// to learn that a key is absent. Get instead seeks an iterator that uses
// the L6 filters: an absent key then costs a filter probe per level, and a
// present one the same data block read as before.
func Get(r pebble.Reader, key []byte) ([]byte, error) {
	it, err := r.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	var out []byte
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if found {
		v, verr := it.ValueAndErr()
		out, err = append([]byte(nil), v...), verr
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("storage: get: %w", err)
	case !found:
		return nil, ErrNotFound
	}
	return out, nil
}

// GetRecent returns a copy of the value of key in r, or ErrNotFound, for a
// key that is usually present and written often (a wallet's account and
// figures): Pebble's own Get stops at the newest memtable or level that
// holds the key, where Get's iterator positions itself in every level. An
// absent key costs what Get avoids, a data block read in L6.
func GetRecent(r pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	return out, nil
}

// Close closes the database. Every batch and iterator must be closed first.
func (d *DB) Close() error {
	if err := d.pdb.Close(); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	return nil
}

// pebbleLogger sends Pebble's messages to zap instead of the standard
// library logger (which writes to stderr).
type pebbleLogger struct{ s *zap.SugaredLogger }

func (l pebbleLogger) Infof(format string, args ...any)  { l.s.Infof(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }

// Fatalf is called by Pebble on corruption and broken invariants, after
// which it must not continue; zap's Fatal logs and exits like Pebble's own
// default logger does.
func (l pebbleLogger) Fatalf(format string, args ...any) { l.s.Fatalf(format, args...) }
