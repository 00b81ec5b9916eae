package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWSAcceptRFCExample(t *testing.T) {
	// RFC 6455 section 1.3.
	if got, want := wsAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Errorf("wsAccept = %q, want %q", got, want)
	}
}

// clientFrame is a masked client frame.
func clientFrame(fin bool, op byte, payload []byte) []byte {
	first := op
	if fin {
		first |= 0x80
	}
	b := []byte{first}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := [4]byte{0x11, 0x22, 0x33, 0x44}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readServerFrame reads one unmasked frame.
func readServerFrame(t *testing.T, r *bufio.Reader) (fin bool, op byte, payload []byte) {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("read frame header: %v", err)
	}
	if hdr[1]&0x80 != 0 {
		t.Fatalf("server frame is masked")
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return hdr[0]&0x80 != 0, hdr[0] & 0x0f, payload
}

func TestWebSocketEcho(t *testing.T) {
	srv := httptest.NewServer(newHandler(identity{Pod: "p1"}, false))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	key := "dGhlIHNhbXBsZSBub25jZQ=="
	req := "GET /any/path HTTP/1.1\r\nHost: x.test\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read handshake response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) || resp.Header.Get("X-Echo-Pod") != "p1" {
		t.Fatalf("handshake: %s %v", resp.Status, resp.Header)
	}

	big := bytes.Repeat([]byte("0123456789"), 30) // 300 bytes: 16-bit length
	for _, m := range []struct {
		op      byte
		payload []byte
	}{{wsText, []byte("hello")}, {wsBinary, big}, {wsPing, []byte("are you there")}} {
		if _, err := conn.Write(clientFrame(true, m.op, m.payload)); err != nil {
			t.Fatal(err)
		}
		want := m.op
		if m.op == wsPing {
			want = wsPong
		}
		fin, op, payload := readServerFrame(t, br)
		if !fin || op != want || !bytes.Equal(payload, m.payload) {
			t.Errorf("sent op %#x %q…, got fin %v op %#x %q…", m.op, trunc(m.payload), fin, op, trunc(payload))
		}
	}
	// A fragmented message comes back fragment by fragment.
	for i, f := range []struct {
		fin bool
		op  byte
	}{{false, wsText}, {true, wsContinuation}} {
		if _, err := conn.Write(clientFrame(f.fin, f.op, []byte{'a' + byte(i)})); err != nil {
			t.Fatal(err)
		}
		fin, op, payload := readServerFrame(t, br)
		if fin != f.fin || op != f.op || string(payload) != string(rune('a'+i)) {
			t.Errorf("fragment %d: got fin %v op %#x %q", i, fin, op, payload)
		}
	}
	if _, err := conn.Write(clientFrame(true, wsClose, []byte{0x03, 0xe8, 'b', 'y', 'e'})); err != nil {
		t.Fatal(err)
	}
	if _, op, payload := readServerFrame(t, br); op != wsClose || !bytes.Equal(payload, []byte{0x03, 0xe8}) {
		t.Errorf("close: got op %#x %v, want close 1000", op, payload)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after close: %v, want EOF", err)
	}
}

func TestWebSocketRejectsUnmaskedAndBadHandshake(t *testing.T) {
	srv := httptest.NewServer(newHandler(identity{}, false))
	defer srv.Close()
	// No Sec-WebSocket-Key: 400.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("handshake without key: %s, want 400", resp.Status)
	}

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	if _, err := conn.Write([]byte{0x81, 0x02, 'h', 'i'}); err != nil { // unmasked text frame
		t.Fatal(err)
	}
	if _, op, payload := readServerFrame(t, br); op != wsClose || !bytes.Equal(payload, []byte{0x03, 0xea}) {
		t.Errorf("unmasked frame: got op %#x %v, want close 1002", op, payload)
	}
}

func trunc(b []byte) string {
	s := string(b)
	if len(s) > 20 {
		s = s[:20]
	}
	return strings.ToValidUTF8(s, "?")
}
