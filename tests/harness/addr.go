package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ReserveAddr holds a free loopback TCP port for a process the test starts
// later, until release is called; release it right before that process
// binds the port.
//
// The port is picked at random below the kernel's ephemeral range. A port
// from that range (what "127.0.0.1:0" gives) can be taken, between release
// and bind, by any outgoing connection on the machine: the validators dial
// each other and the clients dial them, so under load that happens.
func ReserveAddr() (addr string, release func(), err error) {
	low := ephemeralLow()
	const floor = 10000
	if low > floor+1000 {
		for range 100 {
			port := floor + rand.IntN(low-floor)
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				return ln.Addr().String(), func() { _ = ln.Close() }, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("harness: reserve a loopback port: %w", err)
	}
	return ln.Addr().String(), func() { _ = ln.Close() }, nil
}

// FreeAddr is ReserveAddr released at once: a loopback address that was
// free a moment ago and that no outgoing connection takes meanwhile.
func FreeAddr() (string, error) {
	addr, release, err := ReserveAddr()
	if err != nil {
		return "", err
	}
	release()
	return addr, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// elsewhere 0, which makes ReserveAddr ask the kernel for a port).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}
