//! The client script our scripted endpoint plays against the reference
//! server (its `dccpecho`): MP_KEY handshake and echoes on path A, MP_JOIN
//! on path B with both HMACs checked, echoes sent on path B, MP_CLOSE on
//! both subflows.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use mpdccp_proto::wire::profile_keys::{JoinHmac, PlainKeys};
use mpdccp_proto::wire::{DccpKind, MpKey, MpOption, PacketType, ResetCode, WireProfile};
use rand::{Rng, SeedableRng};

use super::hex;
use super::peer::{confirms_for, mp_capable_change, mp_capable_confirm_from_server, Rx, Subflow};

pub const SERVICE: u32 = 42;
pub const PORT: u16 = 1337;

/// Addresses of our endpoint (the client's) and the reference server.
pub struct Addrs {
    pub client_a: IpAddr,
    pub client_b: IpAddr,
    pub server: IpAddr,
}

/// What happened, for assertions and the report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub server_key: Option<[u8; 8]>,
    pub server_ci: u32,
    pub mp_capable_confirmed: bool,
    pub echoes_sent_a: usize,
    pub echoes_sent_b: usize,
    /// Echoes received intact, per subflow they came back on.
    pub echoed_on_a: usize,
    pub echoed_on_b: usize,
    pub join_response_hmac_ok: Option<bool>,
    pub join_response: Option<String>,
    pub resets: Vec<(char, ResetCode)>,
    /// MP_CONFIRM of our MP_ADDADDR (good HMAC) / of the one with a
    /// corrupted HMAC (must stay unconfirmed) / of our MP_REMOVEADDR.
    pub addaddr_confirmed: bool,
    pub forged_addaddr_confirmed: bool,
    pub removeaddr_confirmed: bool,
    /// What the server did to subflow B after MP_REMOVEADDR of its address.
    pub after_remove_b: Option<PacketType>,
    /// Option-46 bytes of the server that our profile could not parse.
    pub unparsed: Vec<String>,
    pub notes: Vec<String>,
}

fn payload(i: usize) -> Vec<u8> {
    let mut p = format!("mpdccp interop echo #{i:03} ").into_bytes();
    p.resize(64, b'a' + (i % 26) as u8);
    p
}

fn note_unparsed(o: &mut Outcome, rx: &Rx) {
    o.unparsed
        .extend(rx.mp.iter().filter_map(|m| m.as_ref().err().cloned()));
}

/// Sends a Request up to three times until the Response comes.
fn connect(sf: &mut Subflow, mp: &[MpOption], o: &mut Outcome) -> io::Result<Rx> {
    for _ in 0..3 {
        sf.send(
            DccpKind::Request {
                service_code: SERVICE,
            },
            mp,
            &[mp_capable_change()],
            &[],
        )?;
        match sf.expect(PacketType::Response, Duration::from_secs(4)) {
            Ok(rx) => {
                note_unparsed(o, &rx);
                return Ok(rx);
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                o.notes.push("Request retransmitted".into())
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no Response to 3 Requests",
    ))
}

/// Waits for the echo of `want` on either subflow, acking the server's
/// data as it comes. Returns the subflow it came back on.
fn await_echo(
    a: &mut Subflow,
    b: Option<&mut Subflow>,
    want: &[u8],
    o: &mut Outcome,
) -> io::Result<Option<char>> {
    let mut b = b;
    for _ in 0..40 {
        for (name, sf) in [('A', Some(&mut *a)), ('B', b.as_deref_mut())] {
            let Some(sf) = sf else { continue };
            let Some(rx) = sf.recv(Duration::from_millis(50))? else {
                continue;
            };
            note_unparsed(o, &rx);
            match rx.ty {
                PacketType::Reset => {
                    o.resets.push((name, reset_code(&rx)));
                    return Ok(None);
                }
                PacketType::Data | PacketType::DataAck if !rx.payload.is_empty() => {
                    sf.send(DccpKind::Ack { ack: sf.ack() }, &[], &[], &[])?;
                    if rx.payload == want {
                        return Ok(Some(name));
                    }
                    o.notes.push(format!(
                        "unexpected payload on {name}: {}",
                        hex(&rx.payload)
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(None)
}

fn reset_code(rx: &Rx) -> ResetCode {
    ResetCode::from_u8(rx.raw.get(24).copied().unwrap_or(0))
}

/// Plays the script; `n_a`/`n_b` echoes are sent on subflow A, then B.
pub fn run_client(
    profile: WireProfile,
    addrs: &Addrs,
    seed: u64,
    n_a: usize,
    n_b: usize,
) -> io::Result<Outcome> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut o = Outcome::default();
    let key_c: [u8; 8] = rng.gen();
    let ci_c: u32 = if profile.key_has_ci() { rng.gen() } else { 0 };
    let mut a = Subflow::new(
        addrs.client_a,
        rng.gen_range(40000..50000),
        addrs.server,
        PORT,
        rng.gen::<u64>() >> 20,
        profile,
    )?;

    // 1. Key exchange on path A (RFC 9897 §3.2.4 / the profile's layout).
    let key = MpOption::Key {
        ci: ci_c,
        keys: vec![MpKey::plain(u64::from_be_bytes(key_c))],
    };
    let resp = connect(&mut a, std::slice::from_ref(&key), &mut o)?;
    let (k_s, ci_s) = resp
        .mp_ok()
        .find_map(|m| match m {
            MpOption::Key { ci, keys } => Some((keys.first()?.data.clone(), *ci)),
            _ => None,
        })
        .ok_or_else(|| io::Error::other(format!("Response without MP_KEY: {}", hex(&resp.raw))))?;
    let key_s: [u8; 8] = k_s
        .try_into()
        .map_err(|_| io::Error::other("server key not 8 bytes"))?;
    o.server_key = Some(key_s);
    o.server_ci = ci_s;
    let (c, d) = mp_capable_confirm_from_server();
    o.mp_capable_confirmed = resp.has_option(c, &d);
    let keys = PlainKeys {
        client: key_c,
        server: key_s,
    };
    let third = if profile.third_key_message() {
        vec![MpOption::Key {
            ci: 0,
            keys: vec![
                MpKey::plain(u64::from_be_bytes(key_c)),
                MpKey::plain(u64::from_be_bytes(key_s)),
            ],
        }]
    } else {
        vec![]
    };
    a.send(
        DccpKind::Ack { ack: resp.seq },
        &third,
        &confirms_for(&resp),
        &[],
    )?;
    a.ack_vectors = true;

    // 2. Echoes on the first subflow, each with MP_SEQ (§3.2.3).
    let mut mp_seq = 1u64;
    for i in 0..n_a {
        let p = payload(i);
        a.send(
            DccpKind::DataAck { ack: a.ack() },
            &[MpOption::Seq(mp_seq)],
            &[],
            &p,
        )?;
        mp_seq += 1;
        o.echoes_sent_a += 1;
        match await_echo(&mut a, None, &p, &mut o)? {
            Some('A') => o.echoed_on_a += 1,
            Some(_) => o.echoed_on_b += 1,
            None => o.notes.push(format!("echo {i} (path A) missing")),
        }
    }

    // 3. MP_JOIN on path B naming the server as the profile does.
    let join_id = profile.join_id(&keys, ci_s);
    let nonce_c: u32 = rng.gen();
    let mut b = Subflow::new(
        addrs.client_b,
        rng.gen_range(50000..60000),
        addrs.server,
        PORT,
        rng.gen::<u64>() >> 20,
        profile,
    )?;
    let join = MpOption::Join {
        addr_id: 1,
        ci: join_id,
        nonce: nonce_c,
    };
    let resp_b = connect(&mut b, &[join], &mut o)?;
    o.join_response = Some(hex(&resp_b.raw));
    let mp_b: Vec<&MpOption> = resp_b.mp_ok().collect();
    let nonce_s = mp_b.iter().find_map(|m| match m {
        MpOption::Join { nonce, .. } => Some(*nonce),
        _ => None,
    });
    let hmac = mp_b.iter().find_map(|m| match m {
        MpOption::Hmac(h) => Some(*h),
        _ => None,
    });
    let Some(nonce_s) = nonce_s else {
        o.notes.push("join Response without MP_JOIN".into());
        return Ok(o);
    };
    let want = profile.join_hmac(&keys, JoinHmac::Response, join_id, nonce_c, nonce_s);
    o.join_response_hmac_ok = Some(hmac == Some(want));
    let ours = profile.join_hmac(&keys, JoinHmac::Ack, join_id, nonce_c, nonce_s);
    b.send(
        DccpKind::Ack { ack: resp_b.seq },
        &[MpOption::Hmac(ours)],
        &confirms_for(&resp_b),
        &[],
    )?;
    b.ack_vectors = true;
    std::thread::sleep(Duration::from_millis(300));

    // 4. Echoes sent on the second subflow (they may come back on either).
    for i in n_a..n_a + n_b {
        let p = payload(i);
        b.send(
            DccpKind::DataAck { ack: b.ack() },
            &[MpOption::Seq(mp_seq)],
            &[],
            &p,
        )?;
        mp_seq += 1;
        o.echoes_sent_b += 1;
        match await_echo(&mut a, Some(&mut b), &p, &mut o)? {
            Some('A') => o.echoed_on_a += 1,
            Some(_) => o.echoed_on_b += 1,
            None => o.notes.push(format!("echo {i} (sent on path B) missing")),
        }
    }

    // 5. Address management on empty Data packets (as the reference sends
    // them): an ADDADDR with a corrupted HMAC, which must not be confirmed,
    // the same with the right HMAC, then REMOVEADDR of subflow B's address.
    let new_addr = MpOption::AddAddr {
        addr_id: 4,
        nonce: None,
        addr: "10.0.3.1".parse().unwrap(),
        port: None,
    };
    let mut forged = profile.addr_hmac(&keys, true, &new_addr).expect("hmac");
    forged[0] ^= 0x80;
    a.send(
        DccpKind::Data,
        &[
            MpOption::Seq(mp_seq),
            new_addr.clone(),
            MpOption::Hmac(forged),
        ],
        &[],
        &[],
    )?;
    mp_seq += 1;
    o.forged_addaddr_confirmed =
        await_confirm(&mut a, &mut b, &mut o, 4, true, Duration::from_millis(1500))?;
    let good = profile.addr_hmac(&keys, true, &new_addr).expect("hmac");
    a.send(
        DccpKind::Data,
        &[MpOption::Seq(mp_seq), new_addr, MpOption::Hmac(good)],
        &[],
        &[],
    )?;
    mp_seq += 1;
    o.addaddr_confirmed = await_confirm(&mut a, &mut b, &mut o, 4, true, Duration::from_secs(3))?;
    let remove = MpOption::RemoveAddr {
        addr_id: 1,
        nonce: None,
    };
    let h = profile.addr_hmac(&keys, true, &remove).expect("hmac");
    a.send(
        DccpKind::Data,
        &[MpOption::Seq(mp_seq), remove, MpOption::Hmac(h)],
        &[],
        &[],
    )?;
    o.removeaddr_confirmed =
        await_confirm(&mut a, &mut b, &mut o, 1, false, Duration::from_secs(3))?;
    if o.after_remove_b.is_none() {
        let types = [PacketType::Reset, PacketType::CloseReq];
        o.after_remove_b = first_of(&mut b, &types, Duration::from_secs(3))?.map(|rx| rx.ty);
    }
    if o.after_remove_b == Some(PacketType::CloseReq) {
        b.send(DccpKind::Close { ack: b.ack() }, &[], &[], &[])?;
        if let Ok(rx) = b.expect(PacketType::Reset, Duration::from_secs(3)) {
            o.resets.push(('B', reset_code(&rx)));
        }
    }
    let b_open = o.after_remove_b.is_none();

    // 6. Close the remaining subflows with MP_CLOSE carrying the server's key.
    let close = [MpOption::Close {
        key_data: profile.close_key_data(&keys, true).to_vec(),
    }];
    let mut open = vec![('A', &mut a)];
    if b_open {
        open.push(('B', &mut b));
    }
    for (name, sf) in open {
        sf.send(DccpKind::Close { ack: sf.ack() }, &close, &[], &[])?;
        match sf.expect(PacketType::Reset, Duration::from_secs(5)) {
            Ok(rx) => o.resets.push((name, reset_code(&rx))),
            Err(e) => o.notes.push(format!("no Reset after Close on {name}: {e}")),
        }
    }
    Ok(o)
}

/// Waits up to `timeout` for an MP_CONFIRM (on either subflow) holding an
/// MP_ADDADDR (`add`) or MP_REMOVEADDR with `addr_id`, acking data meanwhile.
fn await_confirm(
    a: &mut Subflow,
    b: &mut Subflow,
    o: &mut Outcome,
    addr_id: u8,
    add: bool,
    timeout: Duration,
) -> io::Result<bool> {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        for (name, sf) in [('A', &mut *a), ('B', &mut *b)] {
            let Some(rx) = sf.recv(Duration::from_millis(50))? else {
                continue;
            };
            note_unparsed(o, &rx);
            if matches!(rx.ty, PacketType::Reset | PacketType::CloseReq) {
                o.notes
                    .push(format!("{:?} on {name}: {}", rx.ty, hex(&rx.raw)));
                if name == 'B' {
                    o.after_remove_b = Some(rx.ty);
                }
            }
            if !rx.payload.is_empty() {
                sf.send(DccpKind::Ack { ack: sf.ack() }, &[], &[], &[])?;
            }
            let hit = rx.mp_ok().any(|m| match m {
                MpOption::Confirm(items) => items.iter().any(|i| match i {
                    MpOption::AddAddr { addr_id: id, .. } => add && *id == addr_id,
                    MpOption::RemoveAddr { addr_id: id, .. } => !add && *id == addr_id,
                    _ => false,
                }),
                _ => false,
            });
            if hit {
                o.notes.push(format!("MP_CONFIRM: {}", hex(&rx.raw)));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The first packet of one of `types` on `sf` within `timeout`.
fn first_of(sf: &mut Subflow, types: &[PacketType], timeout: Duration) -> io::Result<Option<Rx>> {
    let deadline = std::time::Instant::now() + timeout;
    while let Some(rx) = sf.recv(deadline.saturating_duration_since(std::time::Instant::now()))? {
        if types.contains(&rx.ty) {
            return Ok(Some(rx));
        }
    }
    Ok(None)
}
