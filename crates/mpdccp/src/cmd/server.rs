//! `mpdccp server --config FILE`: the aggregation server (see
//! `mpdccp_net::daemon::server` and `crates/mpdccp-net/README.md`).

daemon_command! {
    /// Server configuration (TOML); `--help` lists the keys, crates/mpdccp-net/README.md explains them.
    ///
    /// Configuration file (TOML), all keys optional unless marked:
    ///
    ///   listen = "0.0.0.0:6511"            (required) UDP address:port for all clients
    ///   max_clients = 1024                  most connections at once
    ///   max_learned_addresses = 65536       inner addresses remembered for routing
    ///   seed = 0                            0 = OS randomness
    ///   auth = "authenticated"              or "open" (RFC 9897 key type 0, any host gets a tunnel);
    ///                                       required unless `listen` is a loopback address
    ///   private_key_file = "/etc/mpdccp/server.key"  (authenticated) mode 0600, `mpdccp genkey`
    ///   [[peer]] name = "cpe1", public_key = "base64…" (`mpdccp pubkey`),
    ///            allowed_ips = ["10.99.1.0/24"] (inner prefixes it sends from and receives),
    ///            psk_file = "/etc/mpdccp/cpe1.psk" (optional)
    ///   [limits] half_open = 1024, half_open_per_peer = 2, half_open_lifetime_ms = 3000,
    ///            cookie_threshold = 16, load_inits_per_sec = 1000, handshakes_per_sec = 20,
    ///            handshake_burst = 5, rate_sources = 8192, open_half_open = 64, resets_per_sec = 200
    ///   [tun]    name = "mpdccp0", addresses = ["10.99.0.1/24", "fd99::1/64"],
    ///            routes = [], mtu = 0 (0 = path_mtu minus all headers),
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
    ///   [ops]    control_socket = "/run/mpdccp.sock", prometheus = "127.0.0.1:9191"
    ///            (Prometheus: text format, any GET; optional)
    ///
    /// SIGTERM or SIGINT (or `mpdccp status --close`) closes gracefully: MP_CLOSE
    /// on every subflow, exit 0 within 3 s. Logs: RUST_LOG=info|debug to stderr.
    config: mpdccp_net::daemon::config::ServerConfig,
    daemon: mpdccp_net::daemon::server::run,
}
