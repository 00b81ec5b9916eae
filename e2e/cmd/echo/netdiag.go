package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
)

// Interface is one network interface as /interfaces and `echo interfaces` report it.
type Interface struct {
	Name  string   `json:"name"`
	Index int      `json:"index"`
	MAC   string   `json:"mac"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs"`
}

// writeInterfaces writes the interfaces of the process' network namespace as a JSON array.
func writeInterfaces(w io.Writer) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	out := make([]Interface, 0, len(ifs))
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		it := Interface{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr.String(), Up: ifi.Flags&net.FlagUp != 0, Addrs: []string{}}
		for _, a := range addrs {
			it.Addrs = append(it.Addrs, a.String())
		}
		out = append(out, it)
	}
	return json.NewEncoder(w).Encode(out)
}

// garpCommand sends one gratuitous ARP request (sender IP = target IP, broadcast) on an
// interface through an AF_PACKET socket, as a layer-2 announcer does after it takes over an
// address (RFC 5227 section 3 "ARP Announcement"). It needs CAP_NET_RAW.
func garpCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("echo garp", flag.ContinueOnError)
	ifname := fs.String("i", "eth0", "Interface to send on.")
	ipFlag := fs.String("ip", "", "IPv4 address to announce; default: the first IPv4 address of the interface.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(*ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", *ifname, err)
	}
	ip, err := announceAddr(ifi, *ipFlag)
	if err != nil {
		return err
	}
	if err := sendGARP(ifi, ip); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sent gratuitous ARP for %s from %s on %s\n", ip, ifi.HardwareAddr, ifi.Name)
	return nil
}

func announceAddr(ifi *net.Interface, flagValue string) (netip.Addr, error) {
	if flagValue != "" {
		ip, err := netip.ParseAddr(flagValue)
		if err != nil || !ip.Is4() {
			return netip.Addr{}, fmt.Errorf("-ip %q: not an IPv4 address", flagValue)
		}
		return ip, nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no IPv4 address", ifi.Name)
}

const ethPARP = 0x0806

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sendGARP writes one broadcast Ethernet frame carrying an ARP request for ip from ip.
func sendGARP(ifi *net.Interface, ip netip.Addr) error {
	if len(ifi.HardwareAddr) != 6 {
		return errors.New("interface has no Ethernet address")
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(ethPARP)))
	if err != nil {
		return fmt.Errorf("open AF_PACKET socket (needs CAP_NET_RAW): %w", err)
	}
	defer syscall.Close(fd)

	// Ethernet header (14) + ARP for IPv4 over Ethernet (28) = 42 bytes.
	frame := make([]byte, 42)
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	copy(frame[0:6], bcast)
	copy(frame[6:12], ifi.HardwareAddr)
	binary.BigEndian.PutUint16(frame[12:14], ethPARP)
	arp := frame[14:]
	binary.BigEndian.PutUint16(arp[0:2], 1)      // hardware type: Ethernet
	binary.BigEndian.PutUint16(arp[2:4], 0x0800) // protocol type: IPv4
	arp[4], arp[5] = 6, 4                        // address lengths
	binary.BigEndian.PutUint16(arp[6:8], 1)      // operation: request
	ip4 := ip.As4()
	copy(arp[8:14], ifi.HardwareAddr) // sender hardware address
	copy(arp[14:18], ip4[:])          // sender protocol address
	// target hardware address stays zero
	copy(arp[24:28], ip4[:]) // target protocol address = sender: gratuitous

	sa := &syscall.SockaddrLinklayer{Protocol: htons(ethPARP), Ifindex: ifi.Index, Halen: 6}
	copy(sa.Addr[:], bcast)
	if err := syscall.Sendto(fd, frame, 0, sa); err != nil {
		return fmt.Errorf("send on %s: %w", ifi.Name, err)
	}
	return nil
}
