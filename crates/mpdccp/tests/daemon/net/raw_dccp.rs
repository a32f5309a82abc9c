//! Native DCCP over raw sockets between two namespaces joined by a veth
//! pair: a Request/Response exchange over IPv4 and IPv6 with the RFC 4340
//! §9 checksum over the real addresses, and a corrupted packet dropped and
//! counted. Needs root (fails under `CI` without it).

use std::net::IpAddr;
use std::sync::mpsc;
use std::time::Duration;

use mpdccp_lab::netns::{self, spawn_in_netns, veth_pair, Netns};
use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::wire::{DccpKind, DccpRepr, Header, Packet};

fn request(seq: u64) -> DccpRepr {
    let header = Header {
        src_port: 40001,
        dst_port: 1337,
        seq,
        kind: DccpKind::Request { service_code: 42 },
        ..Header::default()
    };
    DccpRepr::new(header, Vec::new())
}

fn bytes(r: &DccpRepr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len(payload.len())];
    r.emit(&mut b, payload, None).expect("emit");
    b
}

/// Server in `a` answers one Request with a Response; the client in `b`
/// first sends a Request with a wrong checksum, then a good one.
fn exchange(a: &Netns, b: &Netns, addr_a: IpAddr, addr_b: IpAddr) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = spawn_in_netns(a.name(), move || {
        let mut s = RawDccpSocket::bind(addr_a)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        ready_tx.send(()).ok();
        let mut buf = [0u8; 2048];
        let d = s.recv(&mut buf)?;
        assert_eq!((d.src, d.dst), (addr_b, addr_a));
        let (req, hl) = DccpRepr::parse(&buf[d.start..d.end], Some((d.src, d.dst)))?;
        assert_eq!(req.header.kind, DccpKind::Request { service_code: 42 });
        assert_eq!(&buf[d.start + hl..d.end], b"hello");
        let resp = DccpRepr {
            header: Header {
                src_port: 1337,
                dst_port: req.header.src_port,
                seq: 900,
                kind: DccpKind::Response {
                    ack: req.header.seq,
                    service_code: 42,
                },
                ..Header::default()
            },
            ..Default::default()
        };
        s.send_to(&mut bytes(&resp, b""), d.src)?;
        Ok(s.stats())
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("server ready");
    let client = spawn_in_netns(b.name(), move || {
        let mut c = RawDccpSocket::bind(addr_b)?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        // A Request whose checksum is then broken: must not reach the server.
        let mut bad = bytes(&request(1), b"bogus");
        let mut p = Packet::new_checked(&mut bad[..])?;
        p.fill_checksum((addr_b, addr_a))?;
        let sum = p.checksum();
        p.set_checksum(sum ^ 0x0101);
        c.send_as_is(&bad, addr_a)?;
        std::thread::sleep(Duration::from_millis(50));
        c.send_to(&mut bytes(&request(2), b"hello"), addr_a)?;
        let mut buf = [0u8; 2048];
        let d = c.recv(&mut buf)?;
        let (resp, _) = DccpRepr::parse(&buf[d.start..d.end], Some((d.src, d.dst)))?;
        Ok(resp.header.kind)
    });
    let kind = client.join().expect("client thread").expect("client");
    assert_eq!(
        kind,
        DccpKind::Response {
            ack: 2,
            service_code: 42
        }
    );
    let stats = server.join().expect("server thread").expect("server");
    assert_eq!(stats.bad_checksum, 1, "{stats:?}");
    assert_eq!(stats.received, 2, "{stats:?}");
}

fn topology(tag: &str) -> (Netns, Netns) {
    let p = netns::unique_prefix();
    let a = Netns::new(&format!("{p}{tag}a")).expect("ns a");
    let b = Netns::new(&format!("{p}{tag}b")).expect("ns b");
    let (va, vb) = (format!("{p}{tag}va"), format!("{p}{tag}vb"));
    veth_pair(&va, Some(&a), &vb, Some(&b)).expect("veth");
    a.ip(&["addr", "add", "10.77.0.1/24", "dev", &va]).unwrap();
    b.ip(&["addr", "add", "10.77.0.2/24", "dev", &vb]).unwrap();
    a.ip(&["addr", "add", "fd00:77::1/64", "dev", &va, "nodad"])
        .unwrap();
    b.ip(&["addr", "add", "fd00:77::2/64", "dev", &vb, "nodad"])
        .unwrap();
    a.ip(&["link", "set", &va, "up"]).unwrap();
    b.ip(&["link", "set", &vb, "up"]).unwrap();
    (a, b)
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn native_dccp_ipv4_and_ipv6_over_veth() {
    let _serial = crate::support::serial();
    if !netns::require_root("native_dccp_ipv4_and_ipv6_over_veth") {
        return;
    }
    let (a, b) = topology("r");
    exchange(
        &a,
        &b,
        "10.77.0.1".parse().unwrap(),
        "10.77.0.2".parse().unwrap(),
    );
    exchange(
        &a,
        &b,
        "fd00:77::1".parse().unwrap(),
        "fd00:77::2".parse().unwrap(),
    );
}

#[test]
fn unspecified_local_address_is_refused() {
    assert!(RawDccpSocket::bind("0.0.0.0".parse().unwrap()).is_err());
}
