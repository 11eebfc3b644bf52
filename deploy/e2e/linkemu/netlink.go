package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The NFQUEUE netlink protocol (linux/netfilter/nfnetlink_queue.h): a
// program binds a queue, the kernel sends it a message per queued packet,
// and the program answers each with a verdict. Only the parts linkemu
// needs: bind, packet metadata, accept.

const (
	netlinkNetfilter = 12 // NETLINK_NETFILTER

	nlmsgError = 2 // NLMSG_ERROR
	nlmsgDone  = 3 // NLMSG_DONE

	nlmFRequest = 0x1 // NLM_F_REQUEST
	nlmFAck     = 0x4 // NLM_F_ACK

	subsysQueue = 3 // NFNL_SUBSYS_QUEUE

	msgPacket  = subsysQueue<<8 | 0 // NFQNL_MSG_PACKET
	msgVerdict = subsysQueue<<8 | 1 // NFQNL_MSG_VERDICT
	msgConfig  = subsysQueue<<8 | 2 // NFQNL_MSG_CONFIG

	attrPacketHdr  = 1 // NFQA_PACKET_HDR
	attrVerdictHdr = 2 // NFQA_VERDICT_HDR

	attrCfgCmd     = 1 // NFQA_CFG_CMD
	attrCfgParams  = 2 // NFQA_CFG_PARAMS
	attrCfgMaxLen  = 3 // NFQA_CFG_QUEUE_MAXLEN
	attrCfgMask    = 4 // NFQA_CFG_MASK
	attrCfgFlags   = 5 // NFQA_CFG_FLAGS
	cfgCmdBind     = 1 // NFQNL_CFG_CMD_BIND
	copyMeta       = 1 // NFQNL_COPY_META: the packet's metadata, not its bytes
	cfgFlagFailOpn = 1 // NFQA_CFG_F_FAIL_OPEN: accept, not drop, when the queue is full

	nfAccept = 1 // NF_ACCEPT

	nlmsgHdrLen = 16
	nfgenLen    = 4
)

// errMalformed is a netlink message that does not parse.
var errMalformed = errors.New("malformed netlink message")

// attr is one netlink attribute to encode.
type attr struct {
	typ  uint16
	data []byte
}

// encode builds one netlink message of type typ for queue, with attrs.
func encode(typ, flags uint16, seq uint32, queue uint16, attrs ...attr) []byte {
	b := make([]byte, nlmsgHdrLen+nfgenLen, 64)
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b[16] = 0 // AF_UNSPEC
	b[17] = 0 // NFNETLINK_V0
	binary.BigEndian.PutUint16(b[18:], queue)
	for _, a := range attrs {
		n := 4 + len(a.data)
		h := make([]byte, 4)
		binary.NativeEndian.PutUint16(h[0:], uint16(n))
		binary.NativeEndian.PutUint16(h[2:], a.typ)
		b = append(b, h...)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	return b
}

// bindMessages are the configuration messages that bind queue, copy
// metadata only, set the queue's length and make it fail open.
func bindMessages(queue uint16, maxLen uint32) [][]byte {
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	return [][]byte{
		encode(msgConfig, nlmFRequest|nlmFAck, 1, queue, attr{attrCfgCmd, []byte{cfgCmdBind, 0, 0, 0}}),
		encode(msgConfig, nlmFRequest|nlmFAck, 2, queue,
			attr{attrCfgParams, append(be32(0), copyMeta)},
			attr{attrCfgMaxLen, be32(maxLen)},
			attr{attrCfgMask, be32(cfgFlagFailOpn)},
			attr{attrCfgFlags, be32(cfgFlagFailOpn)}),
	}
}

// verdict is the message that accepts packet id on queue.
func verdict(queue uint16, id uint32) []byte {
	v := binary.BigEndian.AppendUint32(nil, nfAccept)
	v = binary.BigEndian.AppendUint32(v, id)
	return encode(msgVerdict, nlmFRequest, 0, queue, attr{attrVerdictHdr, v})
}

// event is what one received netlink message says: a queued packet's ID,
// or the error code of an acknowledgement (0: success).
type event struct {
	packet bool
	id     uint32
	errno  int32
	seq    uint32
}

// parse splits a buffer read from the socket into its messages.
func parse(b []byte) ([]event, error) {
	var out []event
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, fmt.Errorf("%w: %d bytes left, a header is %d", errMalformed, len(b), nlmsgHdrLen)
		}
		n := binary.NativeEndian.Uint32(b[0:])
		typ := binary.NativeEndian.Uint16(b[4:])
		seq := binary.NativeEndian.Uint32(b[8:])
		if n < nlmsgHdrLen || uint64(n) > uint64(len(b)) {
			return out, fmt.Errorf("%w: length %d with %d bytes left", errMalformed, n, len(b))
		}
		body := b[nlmsgHdrLen:n]
		switch typ {
		case nlmsgError:
			if len(body) < 4 {
				return out, fmt.Errorf("%w: an error message of %d bytes", errMalformed, len(body))
			}
			out = append(out, event{errno: -int32(binary.NativeEndian.Uint32(body)), seq: seq})
		case msgPacket:
			id, err := packetID(body)
			if err != nil {
				return out, err
			}
			out = append(out, event{packet: true, id: id})
		}
		adv := (n + 3) &^ 3
		if uint64(adv) > uint64(len(b)) {
			adv = uint32(len(b))
		}
		b = b[adv:]
	}
	return out, nil
}

// packetID finds NFQA_PACKET_HDR in a packet message's body.
func packetID(body []byte) (uint32, error) {
	if len(body) < nfgenLen {
		return 0, fmt.Errorf("%w: a packet message of %d bytes", errMalformed, len(body))
	}
	a := body[nfgenLen:]
	for len(a) >= 4 {
		n := binary.NativeEndian.Uint16(a[0:])
		typ := binary.NativeEndian.Uint16(a[2:]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if n < 4 || int(n) > len(a) {
			return 0, fmt.Errorf("%w: attribute length %d with %d bytes left", errMalformed, n, len(a))
		}
		if typ == attrPacketHdr {
			if n < 4+4 {
				return 0, fmt.Errorf("%w: a packet header of %d bytes", errMalformed, n-4)
			}
			return binary.BigEndian.Uint32(a[4:]), nil
		}
		adv := (int(n) + 3) &^ 3
		if adv > len(a) {
			break
		}
		a = a[adv:]
	}
	return 0, fmt.Errorf("%w: a packet message without its header", errMalformed)
}
