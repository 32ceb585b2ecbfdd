package sysinfo

import (
	"os"
	"strconv"
	"strings"
)

// residentBytes is the process's resident set size, from /proc.
func residentBytes() (*uint64, bool) {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return nil, false
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return nil, false
	}
	rss := pages * uint64(os.Getpagesize())
	return &rss, true
}

// openFDs counts the process's open file descriptors, from /proc.
func openFDs() (*int, bool) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	n := len(entries)
	return &n, true
}
