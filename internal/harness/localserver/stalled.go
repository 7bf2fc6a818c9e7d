package localserver

import (
	"net"
	"sync"
)

// StalledServer accepts TCP connections on loopback and never answers: a git, chart or
// registry server that has hung. Close stops it and drops the connections it holds.
type StalledServer struct {
	// URL is http://ADDR.
	URL   string
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// StartStalledServer starts a StalledServer.
func StartStalledServer() (*StalledServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &StalledServer{URL: "http://" + l.Addr().String(), l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Close stops listening and closes the connections held.
func (s *StalledServer) Close() {
	s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}
