// Package netguard keeps connections that a tenant's address starts away from addresses they
// must not reach (the node itself, a cloud metadata service): a net.Dialer Control that checks
// the address dialled, so a name that resolves there is refused as its literal is. (manager,
// agent)
package netguard

import (
	"net"
	"net/netip"
	"syscall"
)

// Unreachable are link-local (cloud metadata services live there), unspecified and multicast
// addresses.
func Unreachable(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()
}

// Local is Unreachable or loopback.
func Local(ip netip.Addr) bool { return ip.Unmap().IsLoopback() || Unreachable(ip) }

// Refuse is a net.Dialer Control that fails with err a connection to an address refused names.
func Refuse(refused func(netip.Addr) bool, err error) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		host, _, splitErr := net.SplitHostPort(address)
		if splitErr != nil {
			return splitErr
		}
		ip, parseErr := netip.ParseAddr(host)
		if parseErr != nil {
			return parseErr
		}
		if refused(ip) {
			return err
		}
		return nil
	}
}
