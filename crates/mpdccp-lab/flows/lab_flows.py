#!/usr/bin/env python3
"""Bulk flows of the testbed that iperf3 cannot make.

  quic-server / quic-client   QUIC (aioquic, a real QUIC stack: RFC 9002 loss
                              detection, NewReno as aioquic's default) bulk
                              transfer on one stream, up or down.
  tcp-server / tcp-client     kernel TCP bulk transfer; --mptcp opens the
                              socket with IPPROTO_MPTCP (kernel MPTCP, the
                              TCP reference on the same paths).

The client always runs in the client's namespace and connects to the
server; --direction up: the client sends, down: the server sends. Both ends
print one JSON report on stdout when the transfer ends:
  {"role", "direction", "recv": [[t_s, cumulative_bytes], ...],
   "sent_bytes", "rtt": [[t_s, srtt_ms], ...]}
and the QUIC sender also "cwnd": [[t_s, congestion_window_bytes], ...],
"lost": [[t_s, cumulative_packets_declared_lost], ...] and "loss_events"
(calls of the controller's on_packets_lost: one per ack that found losses).
t_s is CLOCK_MONOTONIC (time.monotonic), which every namespace shares, so
the testbed puts both ends on its own time line. Samples every 100 ms.
"""

import argparse
import asyncio
import json
import socket
import ssl
import sys
import time

SAMPLE_S = 0.1
CHUNK = 64 * 1024
# Bytes the QUIC sender keeps written ahead of what the peer acknowledged:
# enough for the largest bandwidth-delay product of the testbed (60 Mbit/s x
# 300 ms ~ 2.2 MB) without aioquic's per-ack `del buffer[:n]` copying a huge
# buffer.
QUIC_AHEAD = 4 * 1024 * 1024
IPPROTO_MPTCP = 262


class Meter:
    def __init__(self):
        self.total = 0
        self.recv = []
        self.rtt = []
        self.cwnd = []
        self.lost = []
        self.next_t = time.monotonic()

    def add(self, n, srtt_ms=None):
        self.total += n
        self.tick(srtt_ms)

    def tick(self, srtt_ms=None, cwnd=None, lost=None):
        now = time.monotonic()
        if now >= self.next_t:
            self.recv.append([now, self.total])
            if srtt_ms is not None:
                self.rtt.append([now, srtt_ms])
            if cwnd is not None:
                self.cwnd.append([now, cwnd])
            if lost is not None:
                self.lost.append([now, lost])
            self.next_t = now + SAMPLE_S


def grow_rcvbuf(transport, size):
    """Sets the QUIC socket's receive buffer to `size` bytes, as production
    QUIC stacks do (quic-go asks for 7 MiB and warns when it gets less):
    aioquic keeps the kernel default (~208 kB), which a burst of a few
    hundred datagrams overflows while the Python loop is busy. 0: leave the
    default. Returns the size the kernel granted (doubled, socket(7))."""
    sock = transport.get_extra_info("socket")
    if sock is None or size <= 0:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) if sock else None
    try:
        # Root (the lab) may exceed net.core.rmem_max.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUFFORCE, size)
    except (OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def udp_rcvbuf_errors():
    """This namespace's count of UDP datagrams dropped because a socket's
    receive buffer was full (/proc/net/snmp is per network namespace)."""
    try:
        lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Udp:")]
        return int(lines[1][lines[0].index("RcvbufErrors")])
    except (OSError, ValueError, IndexError):
        return None


def report(role, direction, recv, sent, rtt, extra=None):
    out = {
        "role": role,
        "direction": direction,
        "recv": recv,
        "sent_bytes": sent,
        "rtt": rtt,
        "udp_rcvbuf_errors": udp_rcvbuf_errors(),
    }
    out.update(extra or {})
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- TCP / MPTCP


def tcp_socket(mptcp, cc=None):
    proto = IPPROTO_MPTCP if mptcp else 0
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    if cc:
        # The sender's controller decides; an accepted socket inherits it.
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    return s


def tcp_send(sock, secs, meter):
    buf = b"\0" * CHUNK
    end = time.monotonic() + secs
    sent = 0
    while time.monotonic() < end:
        sent += sock.send(buf)
        meter.tick()
    return sent


def tcp_recv(sock, meter, deadline):
    sock.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            b = sock.recv(1 << 20)
        except socket.timeout:
            meter.tick()
            continue
        if not b:
            break
        meter.add(len(b))
    meter.recv.append([time.monotonic(), meter.total])


def tcp_server(a):
    host, port = a.listen.rsplit(":", 1)
    ls = tcp_socket(a.mptcp, a.tcp_cc)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # MPTCP: every address, so the subflow that joins at the address the
    # server announced (ADD_ADDR) finds the listener.
    ls.bind(("" if a.mptcp else host, int(port)))
    ls.listen(1)
    ls.settimeout(a.timeout)
    conn, _ = ls.accept()
    m = Meter()
    # First byte: the direction the client asked for; 8 more: seconds.
    hdr = b""
    conn.settimeout(a.timeout)
    while len(hdr) < 9:
        b = conn.recv(9 - len(hdr))
        if not b:
            return
        hdr += b
    direction = "up" if hdr[:1] == b"U" else "down"
    secs = float(hdr[1:9].decode())
    sent = 0
    if direction == "up":
        tcp_recv(conn, m, time.monotonic() + secs + a.timeout)
    else:
        sent = tcp_send(conn, secs, m)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(a.timeout)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
    report("server", direction, m.recv, sent, [], {"mptcp": a.mptcp, "tcp_cc": a.tcp_cc})
    conn.close()


def tcp_client(a):
    host, port = a.connect.rsplit(":", 1)
    s = tcp_socket(a.mptcp, a.tcp_cc)
    s.settimeout(a.timeout)
    s.connect((host, int(port)))
    s.sendall((b"U" if a.direction == "up" else b"D") + ("%8.2f" % a.secs).encode())
    m = Meter()
    sent = 0
    if a.direction == "up":
        s.settimeout(None)
        sent = tcp_send(s, a.secs, m)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(a.timeout)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
    else:
        tcp_recv(s, m, time.monotonic() + a.secs + a.timeout)
        s.shutdown(socket.SHUT_WR)
    report("client", a.direction, m.recv, sent, [], {"mptcp": a.mptcp, "tcp_cc": a.tcp_cc})
    s.close()


# ------------------------------------------------------------------- QUIC


def quic_config(a, is_client):
    from aioquic.quic.configuration import QuicConfiguration

    cfg = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=["mpdccp-lab"],
        # Flow control never the limit (16 MB >> any path's BDP here).
        max_data=64 << 20,
        max_stream_data=64 << 20,
        max_datagram_size=a.datagram_bytes,
        congestion_control_algorithm=a.cc,
        idle_timeout=a.timeout,
    )
    if is_client:
        cfg.verify_mode = ssl.CERT_NONE
    else:
        cert, key = self_signed()
        cfg.certificate = cert
        cfg.private_key = key
    return cfg


def self_signed():
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mpdccp-lab")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_protocol_class():
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.events import ConnectionTerminated, StreamDataReceived

    class Bulk(QuicConnectionProtocol):
        """Both ends: counts received stream bytes; the sending end writes
        while its buffer is under QUIC_AHEAD."""

        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.meter = Meter()
            self.sent = 0
            self.header = b""
            self.direction = None
            self.secs = 0.0
            self.done = asyncio.get_event_loop().create_future()
            self.role = "client" if self._quic.configuration.is_client else "server"

        def srtt_ms(self):
            return self._quic._loss._rtt_smoothed * 1e3

        def count_losses(self):
            """Counts what the sender's loss detection declares lost (RFC
            9002 §6.1), spurious or not: the tunnel's reordering shows here."""
            self.lost_pkts = 0
            self.loss_events = 0
            cc = self._quic._loss._cc
            inner = cc.on_packets_lost

            def on_packets_lost(*args, **kw):
                self.lost_pkts += len(kw.get("packets", args[0] if args else []))
                self.loss_events += 1
                return inner(*args, **kw)

            cc.on_packets_lost = on_packets_lost

        def sender_extra(self, a):
            out = {"cc": a.cc, "datagram_bytes": a.datagram_bytes}
            if hasattr(self, "lost_pkts"):
                out.update(cwnd=self.meter.cwnd, lost=self.meter.lost,
                           lost_pkts=self.lost_pkts, loss_events=self.loss_events)
            return out

        def sender_tick(self):
            loss = self._quic._loss
            self.meter.tick(self.srtt_ms(), loss.congestion_window, self.lost_pkts)

        async def send_for(self, stream_id, secs):
            end = time.monotonic() + secs
            chunk = b"\0" * CHUNK
            self.count_losses()
            while time.monotonic() < end and not self.done.done():
                st = self._quic._streams.get(stream_id)
                if st is None:
                    break
                ahead = st.sender._buffer_stop - st.sender._buffer_start
                while ahead < QUIC_AHEAD:
                    self._quic.send_stream_data(stream_id, chunk)
                    self.sent += len(chunk)
                    ahead += len(chunk)
                self.transmit()
                self.sender_tick()
                await asyncio.sleep(0.002)
            self._quic.send_stream_data(stream_id, b"", end_stream=True)
            self.transmit()

        def quic_event_received(self, ev):
            if isinstance(ev, StreamDataReceived):
                data = ev.data
                if self.role == "server" and self.direction is None:
                    need = 9 - len(self.header)
                    self.header += data[:need]
                    data = data[need:]
                    if len(self.header) == 9:
                        self.direction = "up" if self.header[:1] == b"U" else "down"
                        self.secs = float(self.header[1:9].decode())
                        if self.direction == "down":
                            asyncio.ensure_future(self.send_for(ev.stream_id, self.secs))
                self.meter.add(len(data))
                if ev.end_stream and not self.done.done():
                    self.meter.recv.append([time.monotonic(), self.meter.total])
                    self.done.set_result(True)
            elif isinstance(ev, ConnectionTerminated):
                if not self.done.done():
                    self.meter.recv.append([time.monotonic(), self.meter.total])
                    self.done.set_result(True)

    return Bulk


async def quic_server_main(a):
    from aioquic.asyncio import serve

    host, port = a.listen.rsplit(":", 1)
    Bulk = make_protocol_class()
    conns = []

    def factory(*args, **kw):
        p = Bulk(*args, **kw)
        conns.append(p)
        return p

    server = await serve(host, int(port), configuration=quic_config(a, False), create_protocol=factory)
    rcvbuf = grow_rcvbuf(server._transport, a.rcvbuf)
    deadline = time.monotonic() + a.timeout
    while not conns and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if not conns:
        server.close()
        return
    p = conns[0]
    try:
        await asyncio.wait_for(p.done, timeout=a.secs_max + a.timeout)
    except asyncio.TimeoutError:
        pass
    # Down: wait until the client has the end of the stream (it closes).
    await asyncio.sleep(0.5)
    report("server", p.direction, p.meter.recv, p.sent, p.meter.rtt,
           dict(p.sender_extra(a), rcvbuf_bytes=rcvbuf))
    server.close()


async def quic_client_main(a):
    from aioquic.asyncio import connect

    host, port = a.connect.rsplit(":", 1)
    Bulk = make_protocol_class()
    async with connect(host, int(port), configuration=quic_config(a, True),
                       create_protocol=Bulk, wait_connected=True) as p:
        rcvbuf = grow_rcvbuf(p._transport, a.rcvbuf)
        sid = p._quic.get_next_available_stream_id()
        p._quic.send_stream_data(sid, (b"U" if a.direction == "up" else b"D")
                                 + ("%8.2f" % a.secs).encode())
        p.transmit()
        if a.direction == "up":
            await p.send_for(sid, a.secs)
            # Until the server has the end of the stream (a second at most).
            for _ in range(100):
                st = p._quic._streams.get(sid)
                if st is None or st.sender._buffer_start >= st.sender._buffer_stop:
                    break
                await asyncio.sleep(0.01)
        else:
            try:
                await asyncio.wait_for(p.done, timeout=a.secs + a.timeout)
            except asyncio.TimeoutError:
                pass
        report("client", a.direction, p.meter.recv, p.sent, p.meter.rtt,
               dict(p.sender_extra(a), rcvbuf_bytes=rcvbuf))
        p.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["quic-server", "quic-client", "tcp-server", "tcp-client"])
    ap.add_argument("--listen")
    ap.add_argument("--connect")
    ap.add_argument("--direction", choices=["up", "down"], default="up")
    ap.add_argument("--secs", type=float, default=10.0)
    ap.add_argument("--secs-max", type=float, default=600.0)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--mptcp", action="store_true")
    ap.add_argument("--cc", default="reno")
    # Kernel TCP's controller (TCP_CONGESTION); none = the system default.
    ap.add_argument("--tcp-cc")
    # quic-go's desired receive buffer (7 MiB); 0 = the kernel default.
    ap.add_argument("--rcvbuf", type=int, default=7 << 20)
    ap.add_argument("--datagram-bytes", type=int, default=1222)
    a = ap.parse_args()
    if a.mode == "tcp-server":
        tcp_server(a)
    elif a.mode == "tcp-client":
        tcp_client(a)
    elif a.mode == "quic-server":
        asyncio.run(quic_server_main(a))
    else:
        asyncio.run(quic_client_main(a))


if __name__ == "__main__":
    main()
