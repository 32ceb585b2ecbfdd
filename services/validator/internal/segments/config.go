package segments

import (
	"errors"
	"fmt"
	"time"

	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Defaults and fixed figures of the catalog.
const (
	// DefaultTarTargetBytes is the size up to which contiguous segments are
	// grouped into one TAR file (docs/architecture.md: storage layout, 256 MiB).
	DefaultTarTargetBytes = 256 << 20

	// RetainedGenerations is how many segment generations GC keeps: 2,
	// fixed by the contract; apply's cleanup keeps them (state, compact.go).
	RetainedGenerations = state.RetainedGenerations
)

// Config configures a Catalog. Zero fields take the defaults above.
type Config struct {
	// NodeID is this validator's raft id, which every answer names.
	// Required, not 0.
	NodeID uint64

	// TarTargetBytes is the size up to which contiguous segments of one
	// generation are grouped into one TAR file. Default
	// DefaultTarTargetBytes. Every validator of a cluster must use the same
	// value: TAR names and archives are compared across validators.
	TarTargetBytes uint64

	// Now is the clock that dates scans and decides how long they are kept.
	// Default time.Now.
	Now func() time.Time
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("segments: invalid config")

func (c Config) withDefaults() Config {
	if c.TarTargetBytes == 0 {
		c.TarTargetBytes = DefaultTarTargetBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c, after defaults, describes a usable catalog.
func (c Config) Validate() error {
	if c.withDefaults().NodeID == 0 {
		return fmt.Errorf("%w: NodeID must not be 0", ErrInvalidConfig)
	}
	return nil
}
