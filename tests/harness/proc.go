package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcMemory reads a memory figure of a process from /proc/<pid>/status
// (Linux), in bytes: "VmRSS" for its resident memory now, "VmHWM" for its
// peak.
func ProcMemory(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s for process %d", field, pid)
}
