//! End to end between network namespaces: the client's second
//! path is configured `priority = 1` (standby). Ping and iperf3 UDP both
//! ways through the tunnel; afterwards `mpdccp status --json` of BOTH
//! daemons shows the standby path carried no data packet in either
//! direction (only its handshake, MP_PRIO/MP_CONFIRM and acks) unless a
//! primary failed over (an RTO or a stall, counted), and that
//! the server learnt the priority (its view of the path says 1).
//!
//! Needs root, `ping` and `iperf3`. Without them the test prints a skip
//! notice, or fails when `CI` is set.

use crate::support::exe;

use mpdccp_lab::iperf;
use mpdccp_lab::netns::{require_root, require_tool};
use mpdccp_lab::topo::{Topology, TunnelOpts, SERVER_TUN_V4};
use serde_json::Value;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(u64::MAX)
}

/// iperf3 UDP at `rate` for 2 s from the client's namespace to the
/// server's tunnel address (`reverse`: the server sends). Returns the
/// receiver's bits per second.
fn iperf_udp(t: &mut Topology, port: u16, rate: &str, reverse: bool) -> f64 {
    let dst = SERVER_TUN_V4.to_string();
    let mut args = vec!["-u", "-b", rate, "-l", "1000", "-t", "2"];
    if reverse {
        args.push("-R");
    }
    let v = iperf::run(t, &dst, port, &args).expect("iperf3");
    iperf::received_bps(&v).expect("bits_per_second")
}

/// The (primary, standby) path entries of one daemon's status, told apart
/// by the priority in force at that daemon.
fn by_priority(st: &Value) -> (Value, Value) {
    let conns = st["connections"].as_array().expect("connections");
    assert_eq!(conns.len(), 1, "{st}");
    let paths = conns[0]["paths"].as_array().expect("paths");
    assert_eq!(paths.len(), 2, "{st}");
    let find = |p: u64| {
        let m: Vec<&Value> = paths.iter().filter(|x| n(&x["priority"]) == p).collect();
        assert_eq!(m.len(), 1, "one path at priority {p}: {st}");
        m[0].clone()
    };
    (find(3), find(1))
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_standby_path_carries_no_data_in_either_direction() {
    let _serial = crate::support::serial();
    let test = "a_standby_path_carries_no_data_in_either_direction";
    if !require_root(test) || !require_tool(test, "iperf3") || !require_tool(test, "ping") {
        return;
    }
    // 10 ms each way: the primary's srtt (~20 ms) is well above the
    // daemons' scheduling noise on a shared host.
    let mut t = Topology::emulated(exe(), 2, 10, 50).expect("topology");
    let opts = TunnelOpts {
        priorities: vec![3, 1],
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");

    // Ping both ways (requests one way, replies the other).
    t.ping_both_ways(10).expect("ping through the tunnel");
    // iperf3 UDP upstream, then downstream, 20 Mbit/s for 2 s each.
    let up = iperf_udp(&mut t, 5301, "20M", false);
    let down = iperf_udp(&mut t, 5302, "20M", true);
    assert!(up > 15e6 && down > 15e6, "up {up:.0} down {down:.0} bit/s");

    let client = t.status(false).expect("client status");
    let server = t.status(true).expect("server status");
    let (cp, cs) = by_priority(&client);
    let (sp, ss) = by_priority(&server);
    // The server's view of the standby path is the client's second path.
    let p1_ip = t.paths[1].client_ip.to_string();
    assert!(
        ss["remote"].as_str().is_some_and(|r| r.contains(&p1_ip)),
        "server standby path {ss} is not from {p1_ip}"
    );
    println!(
        "client primary tx/rx data {}/{}, standby tx/rx data {}/{} (packets {}/{}); \
         server primary tx/rx data {}/{}, standby tx/rx data {}/{} (packets {}/{})",
        cp["stats"]["tx_data_pkts"],
        cp["stats"]["rx_data_pkts"],
        cs["stats"]["tx_data_pkts"],
        cs["stats"]["rx_data_pkts"],
        cs["stats"]["tx_pkts"],
        cs["stats"]["rx_pkts"],
        sp["stats"]["tx_data_pkts"],
        sp["stats"]["rx_data_pkts"],
        ss["stats"]["tx_data_pkts"],
        ss["stats"]["rx_data_pkts"],
        ss["stats"]["tx_pkts"],
        ss["stats"]["rx_pkts"],
    );
    // No data on the standby while the primary works. One RTO on a
    // primary fails it over while a backup is up (`fail_after_rtos_with_backup`
    // = 1): the standby then carries what its window holds, in the
    // direction of the RTO, until the primary's probe is answered. On a
    // loaded host (CI, once) a descheduled daemon causes exactly that; it
    // must be the only way data reaches the standby.
    // A stall handover (`standby_takeovers`) is the same failover, earlier.
    let takeovers: u64 = [&client, &server]
        .iter()
        .map(|st| n(&st["connections"][0]["stats"]["standby_takeovers"]))
        .sum();
    let failovers = n(&cp["stats"]["rtos"]) + n(&sp["stats"]["rtos"]) + takeovers;
    let allowed = 16 * failovers;
    println!("primary failovers (RTOs + stall takeovers, both ends): {failovers}");
    for (who, primary, standby) in [("client", &cp, &cs), ("server", &sp, &ss)] {
        assert_eq!(standby["state"], "Active", "{who}: {standby}");
        for key in ["tx_data_pkts", "rx_data_pkts"] {
            let data = n(&standby["stats"][key]);
            assert!(
                data <= allowed,
                "{who}: standby {key} = {data} with {failovers} RTOs and takeovers on the primaries \
                 (primary {primary}; standby {standby})"
            );
        }
        // It is alive: handshake, MP_PRIO and its confirmation, acks.
        assert!(n(&standby["stats"]["tx_pkts"]) > 0, "{who}: {standby}");
        assert!(n(&standby["stats"]["rx_pkts"]) > 0, "{who}: {standby}");
        // Everything went over the primary: 2 s at 20 Mbit/s each way.
        assert!(
            n(&primary["stats"]["tx_data_pkts"]) > 4000,
            "{who}: {primary}"
        );
        assert!(
            n(&primary["stats"]["rx_data_pkts"]) > 4000,
            "{who}: {primary}"
        );
    }
}
