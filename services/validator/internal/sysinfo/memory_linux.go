package sysinfo

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// cgroupMemory reads the cgroup's bound: v2 memory.max and memory.current,
// else v1 memory.limit_in_bytes and memory.usage_in_bytes. An unbounded
// cgroup ("max", or v1's huge default) is no bound.
func cgroupMemory() (Memory, bool) {
	for _, f := range [][2]string{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		limit, ok := readUint(f[0])
		if !ok || limit >= 1<<62 {
			continue
		}
		used, ok := readUint(f[1])
		if !ok {
			continue
		}
		return Memory{Limit: limit, Free: limit - min(used, limit), Source: MemoryCgroup}, true
	}
	return Memory{}, false
}

// hostMemory reads MemTotal and MemAvailable from /proc/meminfo.
func hostMemory() (Memory, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Memory{}, false
	}
	defer f.Close()
	var total, avail uint64
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		kib, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemTotal":
			total = kib << 10
		case "MemAvailable":
			avail = kib << 10
		}
	}
	if total == 0 {
		return Memory{}, false
	}
	return Memory{Limit: total, Free: min(avail, total), Source: MemoryHost}, true
}

// readUint reads a file holding one decimal number.
func readUint(path string) (uint64, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}
