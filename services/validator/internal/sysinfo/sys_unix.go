//go:build linux || darwin

package sysinfo

import (
	"syscall"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

// DiskUsage reports the file system holding dir.
func DiskUsage(dir string) (api.DiskUsage, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return api.DiskUsage{}, false
	}
	bsize := uint64(st.Bsize)
	total, free, avail := uint64(st.Blocks)*bsize, uint64(st.Bfree)*bsize, uint64(st.Bavail)*bsize
	if total == 0 {
		return api.DiskUsage{}, false
	}
	// Used is what is not free at all; the ratio is of the space the
	// validator can use (used + available), as df computes it, so that it
	// reaches 1 when the validator can write no more.
	used := total - free
	d := api.DiskUsage{Path: dir, TotalBytes: total, FreeBytes: avail, UsedBytes: used}
	if used+avail > 0 {
		d.UsedRatio = float64(used) / float64(used+avail)
	}
	return d, true
}

// cpuSeconds is the CPU time the process has used, user and system.
func cpuSeconds() (*float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return nil, false
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s := d.Seconds()
	return &s, true
}
