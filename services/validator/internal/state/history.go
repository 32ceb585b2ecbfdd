package state

// HashHistory is how many of the latest applied indexes the machine keeps
// the state hash of. Validators apply at different speeds, so two of them
// are rarely at the same index when asked; comparing their hashes at an
// index both have applied (the lower of the two) needs the history. 4096
// entries cover several seconds of a busy cluster and cost 160 KiB.
const HashHistory = 4096

// indexHash is the state hash after one applied index.
type indexHash struct {
	index uint64
	hash  [32]byte
}

// hashHistory is a ring of the latest (index, hash) pairs, in index order
// and without gaps: it is reset whenever the next index does not follow.
type hashHistory struct {
	ring  []indexHash
	start int // position of the oldest pair
	n     int
}

func newHashHistory(capacity int) *hashHistory {
	return &hashHistory{ring: make([]indexHash, capacity)}
}

// add records the hash after index. An index that does not follow the
// newest one (a snapshot restore, the first apply after a restart) starts
// the history over.
func (h *hashHistory) add(index uint64, hash [32]byte) {
	if h.n > 0 && h.ring[(h.start+h.n-1)%len(h.ring)].index+1 != index {
		h.start, h.n = 0, 0
	}
	if h.n == len(h.ring) {
		h.start = (h.start + 1) % len(h.ring)
		h.n--
	}
	h.ring[(h.start+h.n)%len(h.ring)] = indexHash{index, hash}
	h.n++
}

// at returns the hash after index, if the history still holds it.
func (h *hashHistory) at(index uint64) ([32]byte, bool) {
	if h.n == 0 {
		return [32]byte{}, false
	}
	oldest := h.ring[h.start].index
	if index < oldest || index >= oldest+uint64(h.n) {
		return [32]byte{}, false
	}
	return h.ring[(h.start+int(index-oldest))%len(h.ring)].hash, true
}
