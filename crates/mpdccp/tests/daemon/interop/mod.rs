//! Support for the reference-kernel interop tests: finding the images and
//! tools, the namespace that holds the bridges/taps/VMs (and everything
//! started in it, killed on drop), and checking a capture with our decoder.

pub mod conn_driver;
pub mod conn_server;
pub mod peer;
pub mod real;
mod reference;
pub mod script;
pub mod server;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use mpdccp_lab::netns::{self, Netns, Proc};
use mpdccp_proto::wire::capture::CapturedDccp;
use mpdccp_proto::wire::profile_keys::{JoinHmac, PlainKeys};
use mpdccp_proto::wire::{MpOption, Packet, PacketType, WireProfile};

/// The two reference kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    K510,
    K414,
}

impl Kernel {
    pub fn profile(self) -> WireProfile {
        match self {
            Kernel::K510 => WireProfile::ReferenceK510,
            Kernel::K414 => WireProfile::ReferenceK414,
        }
    }
    fn image(self) -> &'static str {
        match self {
            Kernel::K510 => "bzImage",
            Kernel::K414 => "k4.14/bzImage",
        }
    }
    pub fn tag(self) -> &'static str {
        match self {
            Kernel::K510 => "5",
            Kernel::K414 => "4",
        }
    }
}

/// Where the reference material is and which kernel to boot.
pub struct Reference {
    pub dir: PathBuf,
    pub kernel: PathBuf,
    pub profile: WireProfile,
}

const TOOLS: [&str; 4] = ["qemu-system-x86_64", "tcpdump", "mergecap", "ip"];

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// `../shared/reference-kernel` beside the checkout (searched upwards), or
/// `$MPDCCP_REFERENCE_DIR`.
fn reference_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("MPDCCP_REFERENCE_DIR") {
        return Some(PathBuf::from(d));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("shared/reference-kernel"))
        .find(|p| p.join("run-vm.sh").is_file())
}

/// Root, the tools and the images; anything missing fails the test (the
/// tests are `#[ignore]`d and run with `--include-ignored` as root).
pub fn prerequisites(test: &str, kernel: Kernel) -> Option<Reference> {
    netns::require_root(test);
    let mut missing: Vec<String> = TOOLS
        .iter()
        .filter(|t| !on_path(t))
        .map(|t| t.to_string())
        .collect();
    let dir = reference_dir();
    match &dir {
        None => missing.push("../shared/reference-kernel".into()),
        Some(d) => {
            for f in [
                kernel.image(),
                "initramfs.cpio.gz",
                "run-vm.sh",
                "netsetup.sh",
                "two-vm-test.sh",
            ] {
                if !d.join(f).is_file() {
                    missing.push(d.join(f).display().to_string());
                }
            }
        }
    }
    assert!(missing.is_empty(), "{test}: missing {missing:?}");
    let dir = dir?;
    Some(Reference {
        kernel: dir.join(kernel.image()),
        dir,
        profile: kernel.profile(),
    })
}

/// A namespace for the lab. On drop every process still inside it (VMs,
/// tcpdump, scripts: all started by this test) is killed, then it is deleted
/// together with its bridges, taps and veths.
pub struct Lab {
    pub ns: Netns,
    pub procs: Vec<Proc>,
}

impl Lab {
    pub fn new(name: &str) -> Lab {
        Lab {
            ns: Netns::new(name).expect("namespace"),
            procs: Vec::new(),
        }
    }

    /// `sh SCRIPT ARGS…` from the reference directory, inside the namespace.
    pub fn script(&self, r: &Reference, script: &str) -> Command {
        let mut c = self.ns.command("sh");
        c.arg(r.dir.join(script));
        c
    }
}

impl Lab {
    /// Creates the reference bridges and taps (`netsetup.sh up`) and joins
    /// namespace `ours` to them by two veth pairs (names `PREFIX{o,l}{a,b}`)
    /// with `addrs` on path A and B. `policy` = (source, gateway): packets
    /// from that source leave through path B (source-address routing, as
    /// the reference VMs do it).
    pub fn attach(
        &self,
        r: &Reference,
        ours: &Netns,
        prefix: &str,
        addrs: [&str; 2],
        policy: Option<(&str, &str)>,
    ) {
        let st = self
            .script(r, "netsetup.sh")
            .arg("up")
            .status()
            .expect("netsetup.sh");
        assert!(st.success(), "netsetup.sh up");
        for (i, bridge) in ["mpbrA", "mpbrB"].into_iter().enumerate() {
            let path = ["a", "b"][i];
            let (o, l) = (format!("{prefix}o{path}"), format!("{prefix}l{path}"));
            netns::veth_pair(&o, Some(ours), &l, Some(&self.ns)).expect("veth");
            self.ns
                .ip(&["link", "set", &l, "master", bridge, "up"])
                .unwrap();
            ours.ip(&["addr", "add", addrs[i], "dev", &o]).unwrap();
            ours.ip(&["link", "set", &o, "up"]).unwrap();
            if let (Some((src, gw)), "b") = (policy, path) {
                ours.ip(&["rule", "add", "from", src, "table", "101"])
                    .unwrap();
                let net = format!("{}.0/24", &gw[..gw.rfind('.').unwrap_or(0)]);
                ours.ip(&["route", "add", &net, "dev", &o, "table", "101"])
                    .unwrap();
                ours.ip(&[
                    "route", "add", "default", "via", gw, "dev", &o, "table", "101",
                ])
                .unwrap();
            }
        }
        // Replies to the other path's address arrive on this path's link.
        for k in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.default.rp_filter",
        ] {
            ours.sysctl(k, "0").unwrap();
        }
    }

    /// tcpdump on both bridges into `out/path{0,1}.pcap`.
    pub fn capture_bridges(&mut self, out: &Path) {
        for (i, br) in ["mpbrA", "mpbrB"].into_iter().enumerate() {
            let f = out.join(format!("path{i}.pcap"));
            let args = ["-i", br, "-s", "0", "-U", "-w", f.to_str().unwrap()];
            let p = self
                .ns
                .spawn_logged("tcpdump", &args, &out.join("tcpdump.log"))
                .unwrap();
            self.procs.push(p);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    /// Boots a reference VM on `taps` with kernel parameters `params`,
    /// its console in `log`.
    pub fn boot_vm(&mut self, r: &Reference, taps: &str, id: u8, params: &[&str], log: &Path) {
        let run_vm = r.dir.join("run-vm.sh");
        let id = id.to_string();
        let mut args = vec![
            run_vm.to_str().unwrap(),
            "-k",
            r.kernel.to_str().unwrap(),
            "-t",
            taps,
            "-i",
            &id,
            "--",
        ];
        args.extend_from_slice(params);
        let p = self.ns.spawn_logged("sh", &args, log).expect("run-vm.sh");
        self.procs.push(p);
    }
}

/// Both bridge captures of [`Lab::capture_bridges`], path B as interface 1.
pub fn read_bridge_captures(out: &Path) -> Vec<CapturedDccp> {
    let mut pkts = Vec::new();
    for i in 0..2u32 {
        let f = std::fs::read(out.join(format!("path{i}.pcap"))).expect("capture");
        let found = mpdccp_proto::wire::capture::dccp_packets(&f).expect("readable capture");
        pkts.extend(found.into_iter().map(|mut c| {
            c.iface = i;
            c
        }));
    }
    pkts
}

/// Waits until `needle` appears in the file at `path`.
pub fn wait_for_log(path: &Path, needle: &str, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    false
}

impl Drop for Lab {
    fn drop(&mut self) {
        for p in &mut self.procs {
            p.stop();
        }
        kill_all_in(self.ns.name());
    }
}

/// SIGKILL every process in namespace `ns` (`ip netns pids`).
pub fn kill_all_in(ns: &str) {
    let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() else {
        return;
    };
    // Processes inside the namespace this test made, by pid (kill(1): this
    // crate has no `unsafe`).
    let pids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|p| p.parse::<u32>().is_ok())
        .map(str::to_string)
        .collect();
    if !pids.is_empty() {
        let _ = Command::new("kill").arg("-KILL").args(&pids).status();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
}

/// What our decoder found in a capture of a reference session.
#[derive(Debug, Default)]
pub struct SessionCheck {
    pub packets: usize,
    pub bad_dccp: usize,
    pub bad_checksum: usize,
    /// Option-46 bytes the profile could not parse: (frame, hex).
    pub bad_mp: Vec<(usize, String)>,
    /// Data/DataAck packets with payload per (interface, from the client).
    pub payload: BTreeMap<(u32, bool), usize>,
    /// Multipath sub-options seen, by MP_OPT number.
    pub mp_counts: BTreeMap<u8, usize>,
    pub keys: Option<PlainKeys>,
    /// MP_JOIN ids that matched the profile's derivation.
    pub join_ids_ok: usize,
    /// MP_HMACs (join, ADDADDR, REMOVEADDR) verified / wrong.
    pub hmacs_ok: usize,
    pub hmacs_bad: usize,
    /// MP_CLOSE carrying the receiver's key.
    pub closes_ok: usize,
}

#[derive(Default)]
struct HandshakeState {
    key_c: Option<([u8; 8], u32)>,
    key_s: Option<([u8; 8], u32)>,
    nonce_c: Option<u32>,
    nonce_s: Option<u32>,
    join_id: Option<u32>,
}

/// Decodes every DCCP packet of `pkts` with our wire code and `profile`,
/// verifying checksums and every derivation that can be checked.
/// `is_client(addr)` tells the client's addresses.
pub fn check_capture(
    pkts: &[CapturedDccp],
    profile: WireProfile,
    is_client: impl Fn(IpAddr) -> bool,
) -> SessionCheck {
    let mut s = SessionCheck::default();
    let mut hs = HandshakeState::default();
    for c in pkts {
        s.packets += 1;
        let Ok(p) = Packet::new_checked(&c.dccp[..]) else {
            s.bad_dccp += 1;
            continue;
        };
        if p.verify_checksum((c.src, c.dst)).is_err() {
            s.bad_checksum += 1;
        }
        let from_client = is_client(c.src);
        let ty = p.packet_type();
        if matches!(ty, PacketType::Data | PacketType::DataAck) && !p.payload().is_empty() {
            *s.payload.entry((c.iface, from_client)).or_default() += 1;
        }
        let mut opts = Vec::new();
        for o in p.options().flatten().filter(|o| o.kind == 46) {
            match MpOption::parse_in(o.data, profile) {
                Ok(m) => opts.push(m),
                Err(_) => s.bad_mp.push((c.frame, hex(o.data))),
            }
        }
        check_options(&mut s, &mut hs, profile, ty, from_client, &opts);
    }
    s
}

fn check_options(
    s: &mut SessionCheck,
    hs: &mut HandshakeState,
    profile: WireProfile,
    ty: PacketType,
    from_client: bool,
    opts: &[MpOption],
) {
    for (i, o) in opts.iter().enumerate() {
        *s.mp_counts.entry(o.subtype()).or_default() += 1;
        let next_hmac = match opts.get(i + 1) {
            Some(MpOption::Hmac(h)) => Some(*h),
            _ => None,
        };
        let mut verify = |want: Option<[u8; 20]>, got: Option<[u8; 20]>| match (want, got) {
            (Some(w), Some(g)) if w == g => s.hmacs_ok += 1,
            _ => s.hmacs_bad += 1,
        };
        match (o, ty) {
            (MpOption::Key { ci, keys }, PacketType::Request | PacketType::Response) => {
                let k = (keys[0].data.as_slice().try_into().unwrap_or([0; 8]), *ci);
                if ty == PacketType::Request {
                    hs.key_c = Some(k);
                } else {
                    hs.key_s = Some(k);
                }
                if let (Some(c), Some(sv)) = (hs.key_c, hs.key_s) {
                    s.keys = Some(PlainKeys {
                        client: c.0,
                        server: sv.0,
                    });
                }
            }
            (MpOption::Join { ci, nonce, .. }, PacketType::Request) => {
                hs.nonce_c = Some(*nonce);
                hs.join_id = Some(*ci);
                if let (Some(k), Some(sv)) = (s.keys, hs.key_s) {
                    if profile.join_id(&k, sv.1) == *ci {
                        s.join_ids_ok += 1;
                    }
                }
            }
            (MpOption::Join { nonce, .. }, PacketType::Response) => {
                hs.nonce_s = Some(*nonce);
                let want = join_hmac(s.keys, hs, profile, JoinHmac::Response);
                verify(want, next_hmac);
            }
            (MpOption::Hmac(h), PacketType::Ack) if from_client && i == 0 => {
                let want = join_hmac(s.keys, hs, profile, JoinHmac::Ack);
                verify(want, Some(*h));
            }
            (MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. }, _) => {
                let want = s.keys.and_then(|k| profile.addr_hmac(&k, from_client, o));
                verify(want, next_hmac);
            }
            (MpOption::Close { key_data }, _) => {
                if let Some(k) = s.keys {
                    if key_data[..] == profile.close_key_data(&k, from_client) {
                        s.closes_ok += 1;
                    }
                }
            }
            _ => {}
        }
    }
}

fn join_hmac(
    keys: Option<PlainKeys>,
    hs: &HandshakeState,
    profile: WireProfile,
    at: JoinHmac,
) -> Option<[u8; 20]> {
    Some(profile.join_hmac(&keys?, at, hs.join_id?, hs.nonce_c?, hs.nonce_s?))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Boot parameters of the reference client VM against our server at
/// 10.0.1.2: two addresses (path A 10.0.1.1, path B 10.0.2.1), `count`
/// echoes 100 ms apart; `drop_b`: it drops B's address 2 s after B is up
/// (MP_REMOVEADDR); `sched_rr`: its scheduler alternates the paths.
pub fn reference_client_params(count: &str, drop_b: bool, sched_rr: bool) -> Vec<&str> {
    let mut params = vec![
        "ip0=10.0.1.1/24",
        "ip1=10.0.2.1/24",
        "gw1=10.0.2.2",
        "role=client",
        "peer=10.0.1.2",
        count,
        "interval=100",
        "mpdebug=1",
        "startdelay=1",
    ];
    if sched_rr {
        params.push("sched=rr");
    }
    if drop_b {
        params.push("dropaddr=eth1:10.0.2.1/24");
    }
    params
}
