//go:build !(linux || darwin)

package sysinfo

import "github.com/contentledger/contentledger/pkg/api"

// DiskUsage is not reported on this platform.
func DiskUsage(string) (api.DiskUsage, bool) { return api.DiskUsage{}, false }

// cpuSeconds is not reported on this platform.
func cpuSeconds() (*float64, bool) { return nil, false }
