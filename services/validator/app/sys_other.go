//go:build !(linux || darwin)

package app

import "github.com/contentledger/contentledger/pkg/api"

// diskUsage is not reported on this platform.
func diskUsage(string) (api.DiskUsage, bool) { return api.DiskUsage{}, false }

// cpuSeconds is not reported on this platform.
func cpuSeconds() (*float64, bool) { return nil, false }
