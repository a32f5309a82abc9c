//! `mpdccp client --config FILE`: the CPE end of the tunnel (see
//! `mpdccp_net::daemon::client` and `crates/mpdccp-net/README.md`).

daemon_command! {
    /// Client configuration (TOML); `--help` lists the keys, crates/mpdccp-net/README.md explains them.
    ///
    /// Configuration file (TOML), all keys optional unless marked:
    ///
    ///   server = "192.0.2.1:6511"          default server address for every path
    ///   rejoin_backoff_ms = 200             first rejoin delay (doubles, max 30 s)
    ///   seed = 0                            0 = OS randomness
    ///   server_public_key = "base64…"       the server's key (`mpdccp pubkey`); makes auth "authenticated"
    ///   private_key_file = "/etc/mpdccp/client.key"  this client's key (mode 0600, `mpdccp genkey`)
    ///   psk_file = "/etc/mpdccp/psk"        optional pre-shared key (mode 0600)
    ///   auth = "authenticated"              or "open" (RFC 9897 key type 0; default without a server key)
    ///   [[path]]                            (at least one) one per access network
    ///     interface = "wlan0"               (required) SO_BINDTODEVICE
    ///     name = "wifi"                     for logs/status (default: interface)
    ///     source = "192.168.1.10"           default: the interface's address
    ///     remote = "192.0.2.1:6511"         default: `server`
    ///     priority = 3                      MP_PRIO: 1 standby, 2 secondary, 3..15 primary
    ///   [tun]    name = "mpdccp0", addresses = ["10.99.0.2/24", "fd99::2/64"],
    ///            routes = ["default"], mtu = 0 (0 = path_mtu minus all headers),
    ///            txqueuelen = 2000 (packets the kernel queues for the daemon; 0 = its 500)
    ///   [tunnel] cc = "ccid2", scheduler = "acpf", reorder = "per-flow" (names: see below),
    ///            aqm = "fq_codel" (or codel, none), codel_target_ms = 15, codel_interval_ms = 100,
    ///            fq_quantum_bytes = 0 (one packet),
    ///            retransmit_lost = true, retransmit_max_age_ms = 50, retransmit_budget_pct = 5,
    ///            tolerate_random_loss = true (docs/AGGREGATION.md "Random loss"),
    ///            weights = [], reorder_timeout_ms = 50, send_queue_pkts = 1000,
    ///            send_queue_bytes = 2000000, mss_bytes = (path MTU minus IP+UDP), multipath = true,
    ///            max_paths = 8, path_mtu = 1500, socket_buffer_bytes = 262144,
    ///            offload = true, gso_segments = 32,
    ///            keepalive_ms = 2000        probe a silent subflow (Sync/SyncAck); 0 = off
    ///            path_idle_timeout_ms = 15000  close a subflow silent this long; 0 = never
    ///            idle_timeout_ms = 120000   close the connection when every path is silent; 0 = never
    ///   [ops]    control_socket = "/run/mpdccp.sock", prometheus = "127.0.0.1:9192" (server examples: 9191)
    ///            (Prometheus: text format, any GET; optional)
    ///
    /// SIGTERM or SIGINT (or `mpdccp status --close`) closes gracefully: MP_CLOSE
    /// on every subflow, exit 0 within 3 s. Logs: RUST_LOG=info|debug to stderr.
    config: mpdccp_net::daemon::config::ClientConfig,
    daemon: mpdccp_net::daemon::client::run,
}
