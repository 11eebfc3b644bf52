package main

import (
	"encoding/binary"
	"errors"
	"testing"
)

// packetMsg is a kernel's NFQNL_MSG_PACKET for packet id, with an
// attribute before its header as the kernel may send.
func packetMsg(id uint32) []byte {
	hdr := binary.BigEndian.AppendUint32(nil, id)
	hdr = append(hdr, 0x08, 0x00, 1, 0) // hw_protocol, hook, pad
	return encode(msgPacket, 0, 0, 0, attr{9, []byte{1, 2, 3, 4, 5}}, attr{attrPacketHdr, hdr})
}

func TestParse(t *testing.T) {
	ack := encode(nlmsgError, 0, 7, 0)
	binary.NativeEndian.PutUint32(ack[16:], uint32(0)) // errno 0 sits where nfgenmsg would
	buf := append(append(packetMsg(41), packetMsg(42)...), ack...)
	evs, err := parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || !evs[0].packet || evs[0].id != 41 || evs[1].id != 42 || evs[2].packet || evs[2].errno != 0 || evs[2].seq != 7 {
		t.Fatalf("parsed %+v", evs)
	}
	nack := encode(nlmsgError, 0, 1, 0)
	binary.NativeEndian.PutUint32(nack[16:], uint32(0xffffffff)) // -EPERM
	if evs, err := parse(nack); err != nil || len(evs) != 1 || evs[0].errno != 1 {
		t.Fatalf("an error acknowledgement parsed as %+v, %v", evs, err)
	}
	for name, b := range map[string][]byte{
		"short":            packetMsg(1)[:10],
		"length too large": func() []byte { b := packetMsg(1); binary.NativeEndian.PutUint32(b, 1000); return b }(),
		"no header":        encode(msgPacket, 0, 0, 0, attr{9, []byte{1}}),
		"short header":     encode(msgPacket, 0, 0, 0, attr{attrPacketHdr, []byte{1}}),
	} {
		if _, err := parse(b); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want a malformed-message error", name, err)
		}
	}
}

func TestVerdictAndBind(t *testing.T) {
	v := verdict(3, 0xdeadbeef)
	if n := binary.NativeEndian.Uint32(v); int(n) != len(v) || len(v) != 16+4+4+8 {
		t.Fatalf("verdict length %d (header says %d)", len(v), n)
	}
	if binary.NativeEndian.Uint16(v[4:]) != msgVerdict || binary.BigEndian.Uint16(v[18:]) != 3 {
		t.Fatalf("verdict header % x", v[:20])
	}
	if binary.BigEndian.Uint32(v[24:]) != nfAccept || binary.BigEndian.Uint32(v[28:]) != 0xdeadbeef {
		t.Fatalf("verdict body % x", v[20:])
	}
	for _, m := range bindMessages(3, 100) {
		if int(binary.NativeEndian.Uint32(m)) != len(m) || len(m)%4 != 0 {
			t.Fatalf("bind message % x", m)
		}
	}
}

func TestDelayConfig(t *testing.T) {
	for _, c := range []delayConfig{{Delay: -1, MaxLen: 1}, {Delay: 11e9, MaxLen: 1}, {}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (delayConfig{Delay: 40e6, Jitter: 10e6, MaxLen: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: any bytes parse or fail with errMalformed, without panicking.
func FuzzParse(f *testing.F) {
	f.Add(packetMsg(7))
	f.Add(encode(nlmsgError, 0, 1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parse(b); err != nil && !errors.Is(err, errMalformed) {
			t.Fatalf("error %v is not errMalformed", err)
		}
	})
}
