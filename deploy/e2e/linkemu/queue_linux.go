package main

import (
	"errors"
	"fmt"
	"syscall"
)

// queue is a bound NFQUEUE netlink socket.
type queue struct {
	fd  int
	num uint16
}

// openQueue binds NFQUEUE queue num (it needs CAP_NET_ADMIN in the
// network namespace whose packets it takes).
func openQueue(num uint16, maxLen uint32) (*queue, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkNetfilter)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	q := &queue{fd: fd, num: num}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		q.close()
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<20)
	buf := make([]byte, 1<<16)
	for _, m := range bindMessages(num, maxLen) {
		if err := q.send(m); err != nil {
			q.close()
			return nil, fmt.Errorf("nfqueue config: %w", err)
		}
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			q.close()
			return nil, fmt.Errorf("nfqueue config: %w", err)
		}
		evs, err := parse(buf[:n])
		if err != nil {
			q.close()
			return nil, fmt.Errorf("nfqueue config: %w", err)
		}
		for _, e := range evs {
			if !e.packet && e.errno != 0 {
				q.close()
				return nil, fmt.Errorf("nfqueue config of queue %d: %w", num, syscall.Errno(e.errno))
			}
		}
	}
	return q, nil
}

func (q *queue) send(m []byte) error {
	return syscall.Sendto(q.fd, m, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
}

// accept lets packet id through.
func (q *queue) accept(id uint32) error { return q.send(verdict(q.num, id)) }

// read returns the next packets' IDs. A receive buffer overrun (ENOBUFS)
// is not fatal: the kernel failed those packets open.
func (q *queue) read(buf []byte) ([]event, error) {
	n, _, err := syscall.Recvfrom(q.fd, buf, 0)
	if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netlink receive: %w", err)
	}
	return parse(buf[:n])
}

func (q *queue) close() error { return syscall.Close(q.fd) }
