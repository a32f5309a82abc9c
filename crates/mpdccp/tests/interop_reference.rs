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

use interop::{check_capture, prerequisites, Kernel, Lab};
use mpdccp_net::netns::{unique_prefix, Proc};
use mpdccp_proto::wire::capture;
use mpdccp_proto::wire::mp::subtype;

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
