package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// A minimal RFC 6455 WebSocket echo: every data frame a client sends comes back unchanged
// (same opcode, same FIN bit, unmasked), pings get pongs, a close is answered with a close.
// Enough for a test to hold a connection open through a proxy and check each message.

// wsGUID is the fixed GUID of the opening handshake (RFC 6455 section 1.3).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsMaxPayload bounds one frame's payload; larger frames close the connection.
const wsMaxPayload = 1 << 20

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xa
)

// wsAccept is the Sec-WebSocket-Accept value for a Sec-WebSocket-Key.
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveWebSocket completes the handshake and echoes frames until the client closes or an
// error ends the connection. The 101 response names the pod in X-Echo-Pod.
func (h *handler) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if r.Method != http.MethodGet || r.Header.Get("Sec-WebSocket-Version") != "13" || key == "" {
		http.Error(w, "bad WebSocket handshake: want GET, Sec-WebSocket-Version 13 and a Sec-WebSocket-Key", http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "WebSocket needs HTTP/1.1: "+err.Error(), http.StatusHTTPVersionNotSupported)
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nX-Echo-Pod: %s\r\n\r\n", wsAccept(key), h.id.Pod)
	if err := rw.Flush(); err != nil {
		return
	}
	_ = wsEcho(rw.Reader, conn)
}

// wsEcho reads client frames from r and writes the answers to w until a close frame, a
// protocol error or the end of the stream.
func wsEcho(r *bufio.Reader, w io.Writer) error {
	for {
		fin, op, payload, err := wsReadFrame(r)
		if err != nil {
			if errors.Is(err, errWSProtocol) {
				_ = wsWriteFrame(w, true, wsClose, []byte{0x03, 0xea}) // 1002 protocol error
			}
			return err
		}
		switch op {
		case wsClose:
			if len(payload) >= 2 {
				payload = payload[:2] // echo the status code, drop the reason
			}
			return wsWriteFrame(w, true, wsClose, payload)
		case wsPing:
			err = wsWriteFrame(w, true, wsPong, payload)
		case wsPong:
		case wsText, wsBinary, wsContinuation:
			err = wsWriteFrame(w, fin, op, payload)
		default:
			_ = wsWriteFrame(w, true, wsClose, []byte{0x03, 0xea})
			return fmt.Errorf("%w: opcode %#x", errWSProtocol, op)
		}
		if err != nil {
			return err
		}
	}
}

var errWSProtocol = errors.New("websocket protocol error")

// wsReadFrame reads one client frame, which must be masked, and returns it unmasked.
func wsReadFrame(r *bufio.Reader) (fin bool, op byte, payload []byte, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return false, 0, nil, err
	}
	fin, op = hdr[0]&0x80 != 0, hdr[0]&0x0f
	if hdr[0]&0x70 != 0 {
		return false, 0, nil, fmt.Errorf("%w: reserved bits set", errWSProtocol)
	}
	if hdr[1]&0x80 == 0 {
		return false, 0, nil, fmt.Errorf("%w: unmasked client frame", errWSProtocol)
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > wsMaxPayload {
		return false, 0, nil, fmt.Errorf("%w: frame of %d bytes", errWSProtocol, n)
	}
	var mask [4]byte
	if _, err := io.ReadFull(r, mask[:]); err != nil {
		return false, 0, nil, err
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return false, 0, nil, err
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return fin, op, payload, nil
}

// wsWriteFrame writes one unmasked (server) frame.
func wsWriteFrame(w io.Writer, fin bool, op byte, payload []byte) error {
	b := make([]byte, 0, 10+len(payload))
	first := op
	if fin {
		first |= 0x80
	}
	b = append(b, first)
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, payload...)
	_, err := w.Write(b)
	return err
}
