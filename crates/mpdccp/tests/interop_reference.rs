//! Interop with Deutsche Telekom's MP-DCCP reference kernel (issue #15
//! part 2), booted under qemu inside a network namespace this test creates
//! (bridges `mpbrA`/`mpbrB` and the taps of `netsetup.sh` live only there).
//!
//! * `two_reference_vms_*`: the reference client and server VMs over two
//!   paths (`two-vm-test.sh`, round-robin scheduler): every echo counted,
//!   and the capture of both bridges checked by *our* decoder — every
//!   checksum, every option 46 under the kernel's wire profile, the key
//!   exchange, the MP_JOIN identifier and both join HMACs, MP_CLOSE.
//!
//! * `our_client_against_reference_server_*`: our scripted client (the
//!   profile codec and the native raw-socket transport, in its own
//!   namespace joined to both bridges) against the reference server VM:
//!   MP_KEY handshake, echoes on path A, MP_JOIN on path B with both HMACs
//!   verified (the server's by us, ours by the server), echoes sent on
//!   path B; on empty Data packets an MP_ADDADDR with a forged HMAC (must
//!   not be confirmed), the same with the right HMAC (MP_CONFIRM expected),
//!   MP_REMOVEADDR of subflow B's address (MP_CONFIRM, and the server closes
//!   subflow B); MP_CLOSE answered with Reset(Closed); the bridge captures
//!   checked by our decoder.
//!
//! Needs root, qemu-system-x86, tcpdump and mergecap, and
//! `../shared/reference-kernel` (or `$MPDCCP_REFERENCE_DIR`); without them
//! the tests skip, or fail when `CI` is set. A VM boots in ~3 s under TCG;
//! the tests take turns (a lock) so the two-core machine is not swamped.

mod interop;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use interop::script::{run_client, Addrs};
use interop::{check_capture, prerequisites, Kernel, Lab};
use mpdccp_net::netns::{spawn_in_netns, unique_prefix, veth_pair, Netns, Proc};
use mpdccp_proto::wire::capture;
use mpdccp_proto::wire::mp::subtype;
use mpdccp_proto::wire::ResetCode;

static SERIAL: Mutex<()> = Mutex::new(());

const ECHOES: usize = 20;

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpdccp-interop-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("output dir");
    d
}

fn is_client(a: IpAddr) -> bool {
    // netsetup/init addressing: client 10.0.{1,2}.1, server 10.0.{1,2}.2.
    matches!(a, IpAddr::V4(v) if v.octets()[3] == 1)
}

fn two_reference_vms(kernel: Kernel, test: &str) {
    let Some(r) = prerequisites(test, kernel) else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = out_dir(test);
    let mut lab = Lab::new(&format!("{}ri{}", unique_prefix(), kernel.tag()));
    let log = std::fs::File::create(out.join("two-vm-test.log")).unwrap();
    let child = lab
        .script(&r, "two-vm-test.sh")
        .arg(&out)
        .arg("sched=rr")
        .env("KERNEL", &r.kernel)
        .env("COUNT", ECHOES.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("two-vm-test.sh");
    lab.procs.push(Proc::new("two-vm-test.sh".into(), child));
    let st = lab.procs[0].wait_timeout(Duration::from_secs(300));
    assert!(
        st.is_some_and(|s| s.success()),
        "two-vm-test.sh: {st:?}, see {}",
        out.display()
    );

    let client_log = std::fs::read_to_string(out.join("client.log")).unwrap_or_default();
    let server_log = std::fs::read_to_string(out.join("server.log")).unwrap_or_default();
    let want = format!("RESULT sent={ECHOES} echoed={ECHOES} bad=0");
    assert!(
        client_log.contains(&want),
        "client: no `{want}` in {}",
        out.display()
    );
    assert!(
        server_log.contains(&format!("echoed {ECHOES} datagrams")),
        "server log {}",
        out.display()
    );
    assert!(
        client_log.contains("There are 2 subflows"),
        "second subflow never came up"
    );

    let pcap = std::fs::read(out.join("session.pcapng")).expect("merged capture");
    let pkts = capture::dccp_packets(&pcap).expect("our reader parses the capture");
    let s = check_capture(&pkts, r.profile, is_client);
    eprintln!("{test}: {s:?}");
    assert_eq!((s.bad_dccp, s.bad_checksum), (0, 0), "{s:?}");
    assert!(s.bad_mp.is_empty(), "unparsed option 46: {:?}", s.bad_mp);
    assert!(s.keys.is_some(), "no MP_KEY exchange");
    assert_eq!(
        s.join_ids_ok, 1,
        "MP_JOIN does not name the server as the profile derives"
    );
    assert_eq!((s.hmacs_ok, s.hmacs_bad), (2, 0), "join HMACs: {s:?}");
    assert!(s.closes_ok >= 1, "MP_CLOSE with the server's key");
    // Every datagram one way and its echo the other, each path used both ways.
    let sum = |client: bool| {
        s.payload
            .iter()
            .filter(|((_, c), _)| *c == client)
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    assert_eq!((sum(true), sum(false)), (ECHOES, ECHOES), "{:?}", s.payload);
    for k in [(0, true), (0, false), (1, true), (1, false)] {
        assert!(
            s.payload.get(&k).copied().unwrap_or(0) > 0,
            "path {} unused: {:?}",
            k.0,
            s.payload
        );
    }
    assert_eq!(s.mp_counts.get(&subtype::JOIN), Some(&2));
    let third_key = s.mp_counts.get(&subtype::KEY).copied().unwrap_or(0) == 3;
    assert_eq!(third_key, r.profile.third_key_message());
    drop(lab);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn two_reference_vms_k510() {
    two_reference_vms(Kernel::K510, "two_reference_vms_k510");
}

#[test]
fn two_reference_vms_k414() {
    two_reference_vms(Kernel::K414, "two_reference_vms_k414");
}

/// Our scripted client (wire codec + raw sockets, in its own namespace,
/// attached to the bridges by veth pairs) against the reference server VM.
fn our_client_against_reference_server(kernel: Kernel, test: &str) {
    let Some(r) = prerequisites(test, kernel) else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = out_dir(test);
    let p = unique_prefix();
    let t = kernel.tag();
    let ours = Netns::new(&format!("{p}ro{t}")).expect("our namespace");
    let mut lab = Lab::new(&format!("{p}rl{t}"));
    let st = lab
        .script(&r, "netsetup.sh")
        .arg("up")
        .status()
        .expect("netsetup.sh");
    assert!(st.success(), "netsetup.sh up");
    for (path, bridge, addr) in [("a", "mpbrA", "10.0.1.1/24"), ("b", "mpbrB", "10.0.2.1/24")] {
        let (o, l) = (format!("{p}o{t}{path}"), format!("{p}l{t}{path}"));
        veth_pair(&o, Some(&ours), &l, Some(&lab.ns)).expect("veth");
        lab.ns
            .ip(&["link", "set", &l, "master", bridge, "up"])
            .unwrap();
        ours.ip(&["addr", "add", addr, "dev", &o]).unwrap();
        ours.ip(&["link", "set", &o, "up"]).unwrap();
        if path == "b" {
            // Subflow 2 leaves through path B (source-address policy routing,
            // as the reference VMs do it).
            ours.ip(&["rule", "add", "from", "10.0.2.1", "table", "101"])
                .unwrap();
            ours.ip(&["route", "add", "10.0.2.0/24", "dev", &o, "table", "101"])
                .unwrap();
            ours.ip(&[
                "route", "add", "default", "via", "10.0.2.2", "dev", &o, "table", "101",
            ])
            .unwrap();
        }
    }
    for k in [
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.default.rp_filter",
    ] {
        ours.sysctl(k, "0").unwrap();
    }
    for (i, br) in ["mpbrA", "mpbrB"].into_iter().enumerate() {
        let f = out.join(format!("path{i}.pcap"));
        let args = ["-i", br, "-s", "0", "-U", "-w", f.to_str().unwrap()];
        lab.procs.push(
            lab.ns
                .spawn_logged("tcpdump", &args, &out.join("tcpdump.log"))
                .unwrap(),
        );
    }
    let vm_args = [
        r.dir.join("run-vm.sh").to_str().unwrap().to_string(),
        "-k".into(),
        r.kernel.to_str().unwrap().into(),
        "-t".into(),
        "mptaps0,mptaps1".into(),
        "-i".into(),
        "2".into(),
        "--".into(),
        "ip0=10.0.1.2/24".into(),
        "ip1=10.0.2.2/24".into(),
        "role=server".into(),
        "mpdebug=1".into(),
    ];
    let vm_args: Vec<&str> = vm_args.iter().map(String::as_str).collect();
    let server_log = out.join("server.log");
    lab.procs
        .push(lab.ns.spawn_logged("sh", &vm_args, &server_log).unwrap());
    let listening = wait_for_log(
        &server_log,
        "dccpecho server: listening",
        Duration::from_secs(120),
    );
    assert!(
        listening,
        "server VM did not start, see {}",
        server_log.display()
    );

    let (n_a, n_b) = (10, 5);
    let addrs = Addrs {
        client_a: "10.0.1.1".parse().unwrap(),
        client_b: "10.0.2.1".parse().unwrap(),
        server: "10.0.1.2".parse().unwrap(),
    };
    let profile = r.profile;
    let seed = 0x1d0 + u64::from(kernel == Kernel::K414);
    let o = spawn_in_netns(ours.name(), move || {
        Ok(run_client(profile, &addrs, seed, n_a, n_b)?)
    })
    .join()
    .expect("script thread")
    .expect("script");
    std::thread::sleep(Duration::from_secs(2));
    let log = std::fs::read_to_string(&server_log).unwrap_or_default();
    drop(lab); // stops tcpdump and the VM
    eprintln!("{test}: {o:#?}");

    // Our decoder over the bridges' captures (if0 = path A, if1 = path B).
    let mut pkts = Vec::new();
    for i in 0..2u32 {
        let f = std::fs::read(out.join(format!("path{i}.pcap"))).expect("capture");
        pkts.extend(
            capture::dccp_packets(&f)
                .expect("readable")
                .into_iter()
                .map(|mut c| {
                    c.iface = i;
                    c
                }),
        );
    }
    let s = check_capture(&pkts, profile, is_client);
    eprintln!("{test}: capture {s:?}");

    assert!(
        o.mp_capable_confirmed,
        "server did not confirm Multipath Capable"
    );
    assert!(
        o.unparsed.is_empty(),
        "server options we cannot parse: {:?}",
        o.unparsed
    );
    assert_eq!(
        o.echoed_on_a + o.echoed_on_b,
        n_a + n_b,
        "echoes: {:?}",
        o.notes
    );
    assert_eq!(o.join_response_hmac_ok, Some(true), "server's join HMAC");
    assert!(
        o.addaddr_confirmed,
        "reference did not confirm our MP_ADDADDR"
    );
    assert!(
        !o.forged_addaddr_confirmed,
        "reference confirmed an MP_ADDADDR with a wrong HMAC"
    );
    assert!(
        o.removeaddr_confirmed,
        "reference did not confirm our MP_REMOVEADDR"
    );
    assert!(
        o.after_remove_b.is_some(),
        "subflow B not closed after MP_REMOVEADDR of its address"
    );
    assert!(
        o.resets.contains(&('A', ResetCode::Closed)),
        "Close+MP_CLOSE on A not answered by Reset(Closed): {:?}",
        o.resets
    );
    assert!(
        log.contains("There are 2 subflows"),
        "the server never accepted our MP_JOIN"
    );
    assert!(
        log.contains(&format!("echoed {} datagrams", n_a + n_b)),
        "server log: no clean close"
    );
    // Verified in the capture: both join HMACs, ADDADDR, REMOVEADDR; the
    // one bad HMAC is the forged ADDADDR we sent on purpose.
    assert_eq!(
        (s.bad_checksum, s.hmacs_ok, s.hmacs_bad),
        (0, 4, 1),
        "{s:?}"
    );
    assert!(s.closes_ok >= 1);
    let _ = std::fs::remove_dir_all(&out);
}

fn wait_for_log(path: &std::path::Path, needle: &str, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn our_client_against_reference_server_k414() {
    our_client_against_reference_server(Kernel::K414, "our_client_against_reference_server_k414");
}

#[test]
fn our_client_against_reference_server_k510() {
    our_client_against_reference_server(Kernel::K510, "our_client_against_reference_server_k510");
}
