//! One typed tunnel configuration: a scenario's `[tunnel]` settings give the
//! same core `ConnectionConfig` in the simulator, in the daemon, and in the
//! daemon started by the testbed (which writes the daemon's TOML); unknown
//! names are errors that list the valid ones wherever a name is read.
//! The daemon's side is what `daemon::plan::run_plan` returns, the
//! configuration `mpdccp client` and `mpdccp server` really run.
//! No root needed.

use std::path::Path;
use std::process::Command;

use mpdccp_lab::testbed::{daemon_tunnel_config, tunnelled_packet_max};
use mpdccp_lab::topo::{daemon_configs, PathAddrs, TunnelOpts};
use mpdccp_model::scenario::Scenario;
use mpdccp_net::daemon::config::{ClientConfig, ServerConfig, TunnelConfig};
use mpdccp_net::daemon::plan::run_plan;
use mpdccp_net::daemon::{mtu_plan, TunSetup};
use mpdccp_proto::conn::{
    ConnectionConfig, LifetimeConfig, LossConfig, PlpmtudConfig, SendQueueConfig, TunnelSettings,
    PROTECTION_OVERHEAD,
};

/// Outer headers of a DCCP-in-UDP path over IPv4: IP (20) + UDP (8).
const OUTER_IPV4_UDP: u32 = 28;

fn scenario(file: &str) -> Scenario {
    Scenario::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios")
            .join(file),
    )
    .expect("scenario loads")
}

/// The configurations the daemons run for `sc`, as the testbed starts
/// them: the typed `[tunnel]` table, written to TOML and read back by the
/// daemon's own loader, then planned by `run_plan` as `mpdccp server` and
/// `mpdccp client` do (the client's interfaces unknown here: its DPLPMTUD
/// search is bounded by `path_mtu` alone).
fn daemon_side(sc: &Scenario) -> (ConnectionConfig, ConnectionConfig) {
    let (server, client) = daemon_configs_for(sc);
    let server = run_plan(&server.tun_setup(), &server.tunnel).unwrap();
    let client = run_plan(&client.tun_setup(|_| None), &client.tunnel).unwrap();
    (server.conn, client.conn)
}

fn daemon_configs_for(sc: &Scenario) -> (ServerConfig, ClientConfig) {
    let opts = TunnelOpts {
        tunnel: daemon_tunnel_config(sc),
        tun_mtu: tunnelled_packet_max(sc) as u32,
        ..TunnelOpts::default()
    };
    let paths: Vec<PathAddrs> = (1..=sc.path.len()).map(PathAddrs::new).collect();
    let (server, client) = daemon_configs(Path::new("/tmp/x"), &paths, &opts);
    let server = ServerConfig::from_toml_str(&toml::to_string(&server).unwrap()).unwrap();
    let client = ClientConfig::from_toml_str(&toml::to_string(&client).unwrap()).unwrap();
    (server, client)
}

/// The fields that come from the tunnel settings must be equal; the
/// drivers' own fields (daemon timers and GSO, the simulator's checksum
/// shortcut) are listed and compared to what each driver sets.
fn assert_same_settings(
    sim: &ConnectionConfig,
    daemon: &ConnectionConfig,
    path_mtu: u32,
    what: &str,
) {
    assert_eq!(sim.cc, daemon.cc, "{what}: cc");
    assert_eq!(sim.cc_config, daemon.cc_config, "{what}: cc_config");
    assert_eq!(sim.scheduler, daemon.scheduler, "{what}: scheduler");
    assert_eq!(sim.reorder, daemon.reorder, "{what}: reorder");
    assert_eq!(sim.send_queue.pkts, daemon.send_queue.pkts, "{what}");
    assert_eq!(sim.send_queue.bytes, daemon.send_queue.bytes, "{what}");
    assert_eq!(sim.mss_bytes, daemon.mss_bytes, "{what}: mss_bytes");
    assert_eq!(sim.multipath, daemon.multipath, "{what}: multipath");
    assert_eq!(sim.send_queue.codel, daemon.send_queue.codel, "{what}: aqm");
    assert_eq!(sim.send_queue.flows, daemon.send_queue.flows, "{what}: aqm");
    assert_eq!(
        sim.send_queue.flow_quantum, daemon.send_queue.flow_quantum,
        "{what}: fq_quantum_bytes"
    );
    assert_eq!(
        sim.loss.retransmit, daemon.loss.retransmit,
        "{what}: retransmit_lost"
    );
    assert_eq!(
        sim.loss.random_loss_backlog_pkts, daemon.loss.random_loss_backlog_pkts,
        "{what}: tolerate_random_loss"
    );
    assert_eq!(
        sim.window_delay_bound, daemon.window_delay_bound,
        "{what}: window_delay_bound"
    );
    // Everything else: the core's defaults, except each driver's own.
    let d = ConnectionConfig::default();
    let rest = |c: &ConnectionConfig| ConnectionConfig {
        cc: d.cc,
        cc_config: d.cc_config.clone(),
        scheduler: d.scheduler.clone(),
        reorder: d.reorder.clone(),
        mss_bytes: d.mss_bytes,
        multipath: d.multipath,
        window_delay_bound: d.window_delay_bound,
        send_queue: SendQueueConfig {
            pkts: d.send_queue.pkts,
            bytes: d.send_queue.bytes,
            codel: d.send_queue.codel,
            flows: d.send_queue.flows,
            flow_quantum: d.send_queue.flow_quantum,
            ..c.send_queue.clone()
        },
        loss: LossConfig {
            retransmit: d.loss.retransmit,
            random_loss_backlog_pkts: d.loss.random_loss_backlog_pkts,
            ..c.loss.clone()
        },
        ..c.clone()
    };
    assert_eq!(
        rest(sim),
        ConnectionConfig {
            verify_checksums: false,
            fill_checksums: false,
            ..d.clone()
        },
        "{what}: simulator"
    );
    assert_eq!(
        rest(daemon),
        ConnectionConfig {
            max_gso_segments: 32,
            // DPLPMTUD (on by default) searches up to the path MTU.
            plpmtud: Some(PlpmtudConfig::for_path(path_mtu, OUTER_IPV4_UDP, false)),
            loss: LossConfig {
                // A failed path's first probe after one un-doubled RTO (a
                // forged packet's disturbance heals within 1 s; the simulator
                // keeps the published timing).
                first_probe_at_base_rto: true,
                ..d.loss
            },
            lifetime: LifetimeConfig {
                keepalive_interval: Some(std::time::Duration::from_secs(2)),
                path_idle_timeout: Some(std::time::Duration::from_secs(15)),
                idle_timeout: Some(std::time::Duration::from_secs(120)),
                ..d.lifetime
            },
            ..d
        },
        "{what}: daemon"
    );
}

#[test]
fn simulator_daemon_and_testbed_map_settings_alike() {
    for file in [
        "e2-ccid5.toml",
        "e3-ccid2.toml",
        "e4-coupled-cubic.toml",
        "e5-aggregation.toml",
        "e6-ratio-80-20.toml",
    ] {
        let mut sc = scenario(file);
        // Every settings field away from its default at least once.
        if file == "e3-ccid2.toml" {
            sc.apply_set("tunnel.send_queue_bytes", "500000").unwrap();
            sc.apply_set("tunnel.mss_bytes", "1600").unwrap();
            sc.apply_set("tunnel.scheduler", "Load_Balancing").unwrap();
            sc.apply_set("tunnel.weights", "[3, 1]").unwrap();
            sc.apply_set("tunnel.aqm", "fq_codel").unwrap();
            sc.apply_set("tunnel.codel_target_ms", "2.5").unwrap();
            sc.apply_set("tunnel.codel_interval_ms", "50").unwrap();
            sc.apply_set("tunnel.fq_quantum_bytes", "3000").unwrap();
            sc.apply_set("tunnel.retransmit_lost", "true").unwrap();
            sc.apply_set("tunnel.retransmit_max_age_ms", "30").unwrap();
            sc.apply_set("tunnel.retransmit_budget_pct", "2").unwrap();
            sc.apply_set("tunnel.tolerate_random_loss", "true").unwrap();
            sc.apply_set("tunnel.window_delay_bound", "true").unwrap();
            sc.apply_set("tunnel.window_delay_target_ms", "7").unwrap();
            let sim = mpdccp_sim::connection_config(&sc);
            assert_eq!(
                sim.window_delay_bound,
                Some(std::time::Duration::from_millis(7))
            );
            let r = sim
                .loss
                .retransmit
                .expect("retransmit_lost reaches the core");
            assert_eq!(r.max_age, std::time::Duration::from_millis(30));
            assert_eq!(r.budget_pct, 2.0);
            assert_eq!(sim.loss.random_loss_backlog_pkts, Some(3.0));
        }
        if file == "e4-coupled-cubic.toml" {
            sc.apply_set("tunnel.aqm", "codel").unwrap();
        }
        let sim = mpdccp_sim::connection_config(&sc);
        let (server, client) = daemon_side(&sc);
        let path_mtu = daemon_tunnel_config(&sc).path_mtu;
        assert_same_settings(&sim, &server, path_mtu, &format!("{file} server"));
        assert_same_settings(&sim, &client, path_mtu, &format!("{file} client"));
    }
    // The values themselves, for one scenario (E2: CCID5, CPF,
    // active-fixed 15 ms, 1400-byte packets).
    let sim = mpdccp_sim::connection_config(&scenario("e2-ccid5.toml"));
    assert_eq!(sim.cc.name(), "ccid5");
    assert_eq!(sim.reorder.kind.name(), "active-fixed");
    assert_eq!(sim.reorder.timeout, std::time::Duration::from_millis(15));
    assert_eq!(sim.cc_config.mss_bytes, 1400);
    assert_eq!(
        sim.mss_bytes,
        1400 + mpdccp_proto::conn::DATA_HEADER_MAX as u32
    );
}

/// The defaults are one object: the daemon's `[tunnel]` defaults are the
/// core's `TunnelSettings::default()` (no table, a partial table, either
/// end), a scenario without `[tunnel]` gets the same, and both map to the
/// same core settings (the testbed's daemons included).
#[test]
fn simulator_daemon_and_testbed_share_one_set_of_defaults() {
    let defaults = TunnelSettings::default();
    assert_eq!(TunnelConfig::default().settings, defaults);
    let client = |tunnel: &str| {
        let text = format!("server = \"10.1.2.2:6773\"\n{tunnel}[[path]]\ninterface = \"p1\"\n");
        ClientConfig::from_toml_str(&text).unwrap().tunnel
    };
    assert_eq!(client("").settings, defaults);
    // A table that names one key keeps the defaults of all the others.
    let partial = client("[tunnel]\nkeepalive_ms = 3000\n");
    assert_eq!(partial.settings, defaults);
    assert_eq!(partial.keepalive_ms, 3000);
    let server =
        ServerConfig::from_toml_str("listen = \"0.0.0.0:6773\"\nauth = \"open\"\n").unwrap();
    assert_eq!(server.tunnel.settings, defaults);
    let server = ServerConfig::from_toml_str(
        "listen = \"0.0.0.0:6773\"\nauth = \"open\"\n[tunnel]\nmax_paths = 4\n",
    )
    .unwrap();
    assert_eq!(server.tunnel.settings, defaults);

    // A scenario that leaves `[tunnel]` out (E5 without its table).
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/e5-aggregation.toml"),
    )
    .unwrap();
    let start = text.find("\n[tunnel]\n").expect("E5 has a [tunnel] table") + 1;
    let end = start + 1 + text[start + 1..].find("\n[").unwrap() + 1;
    let bare = format!("{}{}", &text[..start], &text[end..]);
    let sc = Scenario::from_toml_str(&bare).unwrap();
    assert_eq!(sc.tunnel, defaults);
    let sim = mpdccp_sim::connection_config(&sc);
    let (server_core, client_core) = daemon_side(&sc);
    let path_mtu = daemon_tunnel_config(&sc).path_mtu;
    assert_same_settings(&sim, &server_core, path_mtu, "defaults, server");
    assert_same_settings(&sim, &client_core, path_mtu, "defaults, client");
    // And the daemon's own defaults reach the core as the simulator's do.
    let daemon = client("");
    let plan = mtu_plan(
        &ClientConfig::from_toml_str("server = \"10.1.2.2:6773\"\n[[path]]\ninterface = \"p1\"\n")
            .unwrap()
            .tun,
        daemon.path_mtu,
        false,
        8,
    );
    let core = daemon.connection_config(&plan);
    let shared = defaults.connection_config(plan.tun_mtu as usize);
    assert_eq!(core.scheduler, shared.scheduler);
    assert_eq!(core.reorder, shared.reorder);
    assert_eq!(core.send_queue.codel, shared.send_queue.codel);
    assert_eq!(core.send_queue.flows, shared.send_queue.flows);
    assert_eq!(core.cc, shared.cc);
}

/// What only the daemon adds to the shared mapping, made once for both
/// ends: `auth = "protected"` keeps the DCCP packet as large as the path
/// allows (the TUN MTU gives way for the AEAD's bytes, docs/SECURITY.md
/// §5) and protects the payload; `tunnel.plpmtud = false` turns the search
/// off; a client's DPLPMTUD search stops at its smallest interface MTU
/// (RFC 8899 §5.1.2 MAX_PLPMTU).
#[test]
fn run_plan_adds_protection_and_plpmtud_alike_for_both_ends() {
    let (server, client) = daemon_configs_for(&scenario("e5-aggregation.toml"));
    let server_setup = server.tun_setup();
    let client_setup = client.tun_setup(|_| None);
    for (what, setup, tunnel) in [
        ("server", &server_setup, &server.tunnel),
        ("client", &client_setup, &client.tunnel),
    ] {
        let open = run_plan(setup, tunnel).unwrap();
        assert!(!open.conn.protect_payload, "{what}");
        let protected = run_plan(
            &TunSetup {
                protected: true,
                ..*setup
            },
            tunnel,
        )
        .unwrap();
        assert!(protected.conn.protect_payload, "{what}");
        assert_eq!(protected.conn.mss_bytes, open.conn.mss_bytes, "{what}");
        assert_eq!(
            protected.mtu.tun_mtu + PROTECTION_OVERHEAD as u32,
            open.mtu.tun_mtu,
            "{what}"
        );
        let off = run_plan(
            &TunSetup {
                plpmtud_max_ip: None,
                ..*setup
            },
            tunnel,
        )
        .unwrap();
        assert_eq!(off.conn.plpmtud, None, "{what}");
        assert_eq!(
            ConnectionConfig {
                plpmtud: None,
                ..open.conn.clone()
            },
            off.conn,
            "{what}"
        );
    }
    let narrow = run_plan(&client.tun_setup(|_| Some(1400)), &client.tunnel).unwrap();
    assert_eq!(
        narrow.conn.plpmtud.map(|p| p.max_bytes),
        Some(1400 - OUTER_IPV4_UDP)
    );
}

/// `--set tunnel.X=foo` and a scenario file with an unknown name fail with
/// the list of valid names.
#[test]
fn unknown_names_are_rejected_with_the_valid_ones() {
    let exe = env!("CARGO_BIN_EXE_mpdccp");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/e2-ccid2.toml");
    for (key, listed) in [
        (
            "cc",
            "unknown congestion control `foo` (expected one of ccid2, ccid5",
        ),
        (
            "scheduler",
            "unknown scheduler `foo` (expected one of cpf, rr",
        ),
        (
            "reorder",
            "unknown reorder strategy `foo` (expected one of passive",
        ),
    ] {
        let out = Command::new(exe)
            .args(["sim", file.to_str().unwrap(), "--set"])
            .arg(format!("tunnel.{key}=foo"))
            .args(["--out", "/nonexistent/never-written"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{key}");
        assert!(err.contains(listed), "--set tunnel.{key}=foo: {err}");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = text.replace("scheduler = \"cpf\"", "scheduler = \"blest\"");
    assert_ne!(bad, text);
    let err = Scenario::from_toml_str(&bad).unwrap_err().to_string();
    assert!(
        err.contains("unknown scheduler `blest`") && err.contains("active-standby"),
        "{err}"
    );
}
