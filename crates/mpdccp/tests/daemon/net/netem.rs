//! The userspace link emulator in a namespace topology: delay and rate.
//!
//! Needs root. Without it the test prints a skip notice, or fails when `CI`
//! is set (CI runs as root, so a skip there would hide a broken setup).

use crate::support::exe;

use mpdccp_lab::netns::require_root;
use mpdccp_lab::topo::Topology;

/// Average RTT (ms) from `ping -c N -i 0.05` output.
fn ping_avg_ms(out: &str) -> f64 {
    // "rtt min/avg/max/mdev = 40.1/40.3/40.9/0.2 ms"
    let line = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .expect("ping summary line");
    let nums = line.split('=').nth(1).expect("values").trim();
    nums.split('/')
        .nth(1)
        .expect("avg")
        .parse()
        .expect("number")
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn netem_delay_and_rate() {
    let _serial = crate::support::serial();
    if !require_root("netem_delay_and_rate") {
        return;
    }
    let mut t = Topology::build(1).expect("topology");
    t.start_emulator(
        exe(),
        0,
        &[
            "--delay-ms",
            "20",
            "--rate-mbps",
            "20",
            "--buffer-bytes",
            "150000",
        ],
    )
    .expect("emulator");
    let dst = t.paths[0].server_ip.to_string();
    // Delay: 20 ms each way => RTT 40 ms (+ a 84-byte packet's serialization at 20 Mbit/s, 34 us).
    // A stalled host (the emulator late by more than the 2 ms tolerance) repeats the round.
    let rtt_ok = |out: &String| (ping_avg_ms(out) - 40.0).abs() <= 2.0;
    let out = t.measure_on_time(
        3,
        2_000,
        |t| {
            t.client
                .output("ping", &["-c", "20", "-i", "0.05", "-q", &dst])
                .expect("ping")
        },
        rtt_ok,
    );
    let avg = ping_avg_ms(&out);
    assert!(
        rtt_ok(&out),
        "RTT {avg} ms through a 20 ms link, want 40 +- 2\n{out}"
    );

    // Rate: iperf3 UDP at 30 Mbit/s through a 20 Mbit/s link delivers 20 +- 5 %.
    // iperf3 counts UDP payload; the link's rate is on IP packets (1200 + 28).
    let ip_mbps = t.measure_on_time(
        3,
        2_000,
        |t| {
            let v = mpdccp_lab::iperf::run(
                t,
                &dst,
                5201,
                &["-u", "-b", "30M", "-l", "1200", "-t", "3"],
            )
            .expect("iperf3");
            let bps = mpdccp_lab::iperf::received_bps(&v).expect("bits_per_second");
            bps / 1e6 * 1228.0 / 1200.0
        },
        |m| (m - 20.0).abs() <= 1.0,
    );
    assert!(
        (ip_mbps - 20.0).abs() <= 1.0,
        "rate-limited throughput {ip_mbps:.2} Mbit/s, want 20 +- 5 %"
    );
}
