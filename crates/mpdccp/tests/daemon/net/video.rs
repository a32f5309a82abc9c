//! The real-time (video) goal on the real tunnel, short form: `mpdccp
//! testbed --video` on the 20 + 20 Mbit/s pair (DSL 15 ms + LTE 35 ms,
//! `mpdccp netem` paths, 150 kB buffers): an 8 Mbit/s VP8 RTP stream from
//! GStreamer up through the tunnel (daemon defaults, authenticated) and
//! over each path alone, two plays of 4 s with 2 s of silence between.
//!
//! Fails when the stream does not cross (under 90 % delivered, or not
//! about 8 Mbit/s offered: the measurement measured nothing), or when the
//! tunnel loses more packets than the best path alone (met since the
//! first measurement: keyframe bursts overflow one path's buffer, not
//! two: 65 against 301 of about 6 100), or clearly more frames (more than
//! two beyond the best path's). The delay goals (OWD p99 within 1.5 × the best path's,
//! also after idle) are not met yet and are printed, not asserted.
//!
//! Needs root and GStreamer (`gst-launch-1.0` with vp8enc, webmmux,
//! rtpvp8pay: Debian gstreamer1.0-tools, -plugins-base, -plugins-good;
//! `.ci/run` installs them); else a failure under `cargo test --
//! --include-ignored`, as every root test.

use std::process::Command;

use mpdccp_lab::netns::{require_root, require_tool};
use serde_json::Value;

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn rtp_video_through_the_tunnel_loses_no_more_than_the_best_path_alone() {
    let _serial = crate::support::serial();
    let test = "rtp_video_through_the_tunnel_loses_no_more_than_the_best_path_alone";
    if !require_root(test) || !require_tool(test, "gst-launch-1.0") {
        return;
    }
    let out = std::env::temp_dir().join(format!("mpdccp-video-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let st = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args([
            "testbed",
            "--video",
            "--video-play-s",
            "4",
            "--video-idle-s",
            "2",
            "--out",
        ])
        .arg(&out)
        .status()
        .expect("run mpdccp testbed --video");
    assert!(st.success(), "mpdccp testbed --video failed");
    let text = std::fs::read_to_string(out.join("video.json")).expect("video.json");
    let r: Value = serde_json::from_str(&text).expect("video.json is JSON");
    let _ = std::fs::remove_dir_all(&out);
    println!("{}", mpdccp_lab::video::markdown(&r));
    let cells = r["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 3, "tunnel, dsl, lte");
    for c in cells {
        let s = &c["stats"];
        let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
        let via = c["via"].as_str().unwrap_or("?");
        assert!(
            (5.0..=11.0).contains(&f("sent_mbps")),
            "{via}: offered {} Mbit/s, not the 8 Mbit/s stream",
            f("sent_mbps")
        );
        assert!(
            f("received") >= 0.9 * f("sent"),
            "{via}: {} of {} delivered",
            s["received"],
            s["sent"]
        );
        assert_eq!(
            s["frames"].as_u64(),
            Some(240),
            "{via}: 2 plays × 4 s × 30 fps"
        );
        assert!(
            f("after_idle_owd_p99_ms") > 0.0,
            "{via}: no packet after idle"
        );
    }
    let goals = r["goals"].as_array().expect("goals");
    assert_eq!(goals[0]["met"], Value::Bool(true), "{}", goals[0]);
    // Incomplete frames come from the keyframe bursts (one every 2 s, 4
    // per cell): a count of a few, so one or two either way is noise.
    let frames = |k: &str| goals[1][k].as_f64().expect("frame count");
    assert!(frames("tunnel") <= frames("best") + 2.0, "{}", goals[1]);
    for g in &goals[2..] {
        if g["met"] != Value::Bool(true) {
            println!("NOT MET (a goal of docs/AGGREGATION.md): {g}");
        }
    }
}
