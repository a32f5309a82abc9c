//! The server script: our scripted endpoint as an MP-DCCP echo server for
//! the reference client VM (its `dccpecho client`). It accepts the MP_KEY
//! Request, answers the client's MP_JOIN with the HMAC the profile
//! derives and checks the client's, echoes every datagram on the subflow
//! it came on with a fresh MP_SEQ, and answers Close+MP_CLOSE (key
//! checked) with Reset(Closed).

use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::wire::profile_keys::{JoinHmac, PlainKeys};
use mpdccp_proto::wire::{DccpKind, MpKey, MpOption, PacketType, ResetCode, WireProfile};
use rand::{Rng, SeedableRng};

use super::hex;
use super::peer::{confirms_for, wait_request, Rx, Subflow};
use super::script::{PORT, SERVICE};

/// What the reference client did, as our server saw it.
#[derive(Debug, Default)]
pub struct ServerOutcome {
    pub client_key: Option<[u8; 8]>,
    pub client_ci: u32,
    pub mp_capable_requested: bool,
    /// k5.10: the client's first Ack repeated both keys correctly.
    pub third_key_ok: Option<bool>,
    /// MP_JOIN: its identifier named us as the profile derives; the HMAC in
    /// the client's Ack verified.
    pub join_id_ok: Option<bool>,
    pub join_ack_hmac_ok: Option<bool>,
    /// The Address ID in the client's MP_JOIN.
    pub join_addr_id: Option<u8>,
    /// MP_ADDADDR / MP_REMOVEADDR received: (option, its HMAC verified).
    pub addresses: Vec<(MpOption, bool)>,
    /// Datagrams echoed, per subflow they arrived on (A, B).
    pub echoed: [usize; 2],
    /// Close+MP_CLOSE per subflow with the right key (our key).
    pub closes_ok: Vec<char>,
    pub closes_bad: Vec<char>,
    pub unparsed: Vec<String>,
    pub notes: Vec<String>,
}

fn key_of(rx: &Rx) -> Option<(Vec<MpKey>, u32)> {
    rx.mp_ok().find_map(|m| match m {
        MpOption::Key { ci, keys } => Some((keys.clone(), *ci)),
        _ => None,
    })
}

/// Serves one connection on `local`:1337 until it is closed or `limit`
/// passes.
pub fn run_server(
    profile: WireProfile,
    local: IpAddr,
    seed: u64,
    limit: Duration,
) -> io::Result<ServerOutcome> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut o = ServerOutcome::default();
    let key_s: [u8; 8] = rng.gen();
    let ci_s: u32 = if profile.key_has_ci() { rng.gen() } else { 0 };
    // Both sockets see every packet to `local`; the second one waits for the join.
    let (sock_a, sock_b) = (RawDccpSocket::bind(local)?, RawDccpSocket::bind(local)?);
    let is_key_req = |rx: &Rx| key_of(rx).is_some();
    let (mut a, req) = Subflow::accept(
        sock_a,
        PORT,
        rng.gen::<u64>() >> 20,
        profile,
        limit,
        is_key_req,
    )?;
    o.unparsed
        .extend(req.mp.iter().filter_map(|m| m.as_ref().err().cloned()));
    let (keys_c, ci_c) = key_of(&req).expect("accepted on MP_KEY");
    let key_c: [u8; 8] = keys_c[0]
        .data
        .as_slice()
        .try_into()
        .map_err(|_| io::Error::other("client key not plain"))?;
    o.client_key = Some(key_c);
    o.client_ci = ci_c;
    o.mp_capable_requested = req.has_option(34, &[10, 0]);
    let keys = PlainKeys {
        client: key_c,
        server: key_s,
    };

    let our_key = MpOption::Key {
        ci: ci_s,
        keys: vec![MpKey::plain(u64::from_be_bytes(key_s))],
    };
    a.send(
        DccpKind::Response {
            ack: req.seq,
            service_code: SERVICE,
        },
        &[our_key],
        &confirms_for(&req),
        &[],
    )?;
    let ack = a.expect(PacketType::Ack, Duration::from_secs(5))?;
    if profile.third_key_message() {
        let both = vec![
            MpKey::plain(u64::from_be_bytes(key_c)),
            MpKey::plain(u64::from_be_bytes(key_s)),
        ];
        o.third_key_ok = Some(key_of(&ack).is_some_and(|(k, _)| k == both));
    }
    a.ack_vectors = true;
    // The client stays in PARTOPEN, retransmitting its Ack, until it hears
    // from us (RFC 4340 §8.1.5): acknowledge at once, as the reference does.
    a.send(DccpKind::Ack { ack: a.ack() }, &[], &[], &[])?;

    let join_id = profile.join_id(&keys, ci_s);
    let mut listener = Some(sock_b);
    let mut b: Option<Subflow> = None;
    let mut mp_seq = 1u64;
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !o.closes_ok.contains(&'A') {
        // The join, once: a Request carrying MP_JOIN on the second socket.
        if let Some(sock) = listener.as_mut() {
            let is_join = |rx: &Rx| rx.mp_ok().any(|m| matches!(m, MpOption::Join { .. }));
            if let Some((peer, port, req)) =
                wait_request(sock, PORT, profile, Duration::from_millis(20), is_join)?
            {
                let sock = listener.take().expect("listener");
                let sf = Subflow::accepted(
                    sock,
                    PORT,
                    peer,
                    port,
                    &req,
                    rng.gen::<u64>() >> 20,
                    profile,
                );
                b = Some(answer_join(
                    sf, &req, profile, &keys, ci_c, join_id, &mut rng, &mut o,
                )?);
            }
        }
        let mut removed = None;
        for (i, sf) in [Some(&mut a), b.as_mut()].into_iter().enumerate() {
            let Some(sf) = sf else { continue };
            removed = removed.or(serve_one(sf, i, profile, &keys, &mut mp_seq, &mut o)?);
        }
        // MP_REMOVEADDR of the address subflow B uses: reset B, as the
        // reference server does.
        if let (Some(id), Some(sf)) = (removed, b.as_mut()) {
            if Some(id) == o.join_addr_id {
                let reset = DccpKind::Reset {
                    ack: sf.ack(),
                    code: ResetCode::Closed,
                    data: [0; 3],
                };
                sf.send(reset, &[], &[], &[])?;
                o.notes
                    .push(format!("subflow B reset after MP_REMOVEADDR {id}"));
                b = None;
            }
        }
    }
    // The other subflow's Close may follow the first one.
    if let Some(sf) = b.as_mut() {
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && !o.closes_ok.contains(&'B') {
            serve_one(sf, 1, profile, &keys, &mut mp_seq, &mut o)?;
        }
    }
    Ok(o)
}

/// Answers a join Request: MP_JOIN with our nonce and MP_HMAC, then checks
/// the HMAC in the client's Ack.
#[allow(clippy::too_many_arguments)]
fn answer_join(
    mut sf: Subflow,
    req: &Rx,
    profile: WireProfile,
    keys: &PlainKeys,
    ci_c: u32,
    join_id: u32,
    rng: &mut impl Rng,
    o: &mut ServerOutcome,
) -> io::Result<Subflow> {
    let Some((id, nonce_c)) = req.mp_ok().find_map(|m| match m {
        MpOption::Join { ci, nonce, addr_id } => {
            o.join_addr_id = Some(*addr_id);
            Some((*ci, *nonce))
        }
        _ => None,
    }) else {
        return Err(io::Error::other("join without MP_JOIN"));
    };
    o.join_id_ok = Some(id == join_id);
    let nonce_s: u32 = rng.gen();
    let join = MpOption::Join {
        addr_id: 0,
        ci: profile.join_response_id(keys, ci_c),
        nonce: nonce_s,
    };
    let hmac = profile.join_hmac(keys, JoinHmac::Response, join_id, nonce_c, nonce_s);
    sf.send(
        DccpKind::Response {
            ack: req.seq,
            service_code: SERVICE,
        },
        &[join, MpOption::Hmac(hmac)],
        &confirms_for(req),
        &[],
    )?;
    let ack = sf.expect(PacketType::Ack, Duration::from_secs(5))?;
    let want = profile.join_hmac(keys, JoinHmac::Ack, join_id, nonce_c, nonce_s);
    let got = ack.mp_ok().find_map(|m| match m {
        MpOption::Hmac(h) => Some(*h),
        _ => None,
    });
    o.join_ack_hmac_ok = Some(got == Some(want));
    if got != Some(want) {
        o.notes.push(format!("join Ack: {}", hex(&ack.raw)));
    }
    sf.ack_vectors = true;
    sf.send(DccpKind::Ack { ack: sf.ack() }, &[], &[], &[])?;
    Ok(sf)
}

/// Handles at most one packet of subflow `i` (0 = A, 1 = B).
fn serve_one(
    sf: &mut Subflow,
    i: usize,
    profile: WireProfile,
    keys: &PlainKeys,
    mp_seq: &mut u64,
    o: &mut ServerOutcome,
) -> io::Result<Option<u8>> {
    let name = if i == 0 { 'A' } else { 'B' };
    let Some(rx) = sf.recv(Duration::from_millis(20))? else {
        return Ok(None);
    };
    o.unparsed
        .extend(rx.mp.iter().filter_map(|m| m.as_ref().err().cloned()));
    match rx.ty {
        PacketType::Data | PacketType::DataAck if !rx.payload.is_empty() => {
            sf.send(
                DccpKind::DataAck { ack: sf.ack() },
                &[MpOption::Seq(*mp_seq)],
                &[],
                &rx.payload,
            )?;
            *mp_seq += 1;
            o.echoed[i] += 1;
        }
        PacketType::Close => {
            // A subflow's own Close (e.g. its address went away) has no
            // MP_CLOSE; a connection close carries the receiver's key.
            let key = rx.mp_ok().find_map(|m| match m {
                MpOption::Close { key_data } => Some(key_data.clone()),
                _ => None,
            });
            match key {
                Some(k) if k[..] == profile.close_key_data(keys, true) => o.closes_ok.push(name),
                Some(_) => {
                    o.closes_bad.push(name);
                    o.notes.push(format!("Close on {name}: {}", hex(&rx.raw)));
                }
                None => o.notes.push(format!("plain Close on {name}")),
            }
            let reset = DccpKind::Reset {
                ack: sf.ack(),
                code: ResetCode::Closed,
                data: [0; 3],
            };
            sf.send(reset, &[], &[], &[])?;
        }
        PacketType::Data => return confirm_addresses(sf, &rx, profile, keys, o),
        _ => {}
    }
    Ok(None)
}

/// An empty Data packet may carry MP_ADDADDR / MP_REMOVEADDR, each followed
/// by its MP_HMAC. A verified one is confirmed with MP_CONFIRM holding the
/// packet's MP_SEQ and the option (as the reference does it, on an empty
/// Data packet without MP_SEQ of its own). Returns a removed Address ID.
fn confirm_addresses(
    sf: &mut Subflow,
    rx: &Rx,
    profile: WireProfile,
    keys: &PlainKeys,
    o: &mut ServerOutcome,
) -> io::Result<Option<u8>> {
    let mp: Vec<&MpOption> = rx.mp_ok().collect();
    let seq = mp.iter().find_map(|m| match m {
        MpOption::Seq(s) => Some(*s),
        _ => None,
    });
    let mut removed = None;
    for (i, m) in mp.iter().enumerate() {
        if !matches!(m, MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. }) {
            continue;
        }
        let want = profile.addr_hmac(keys, true, m);
        let ok = matches!(mp.get(i + 1), Some(MpOption::Hmac(h)) if Some(*h) == want);
        o.addresses.push(((*m).clone(), ok));
        if !ok {
            continue;
        }
        let mut items = seq.map(MpOption::Seq).into_iter().collect::<Vec<_>>();
        items.push((*m).clone());
        sf.send(DccpKind::Data, &[MpOption::Confirm(items)], &[], &[])?;
        if let MpOption::RemoveAddr { addr_id, .. } = m {
            removed = Some(*addr_id);
        }
    }
    Ok(removed)
}
