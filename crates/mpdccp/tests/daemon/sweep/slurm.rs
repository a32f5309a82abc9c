//! The cluster path for real: a one-node Slurm cluster (munged with a
//! generated key, slurmctld and slurmd from a generated minimal slurm.conf,
//! all in a temp dir, on free ports) runs a small sweep as a job array; the
//! collected result must equal the local `sweep` byte for byte. Needs root
//! and Debian's `slurm-wlm` and `munge` (`.ci/run` installs them); without
//! them it prints a skip notice, or fails when `CI` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::support::*;

/// Finds a program in PATH or the sbin directories daemons live in.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A port nobody listens on now (the kernel's pick for port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

/// Stops the daemons it started (by their pid files) when the test ends,
/// pass or fail.
struct Cluster {
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in ["slurmd", "slurmctld", "munged"] {
            let Ok(pid) = std::fs::read_to_string(self.dir.join(format!("{d}.pid"))) else {
                continue;
            };
            let pid = pid.trim().to_owned();
            let _ = Command::new("kill").arg(&pid).status();
            // Wait (bounded) until it is gone, so the next daemon and the
            // temp dir's removal do not race it.
            let t0 = Instant::now();
            while Path::new(&format!("/proc/{pid}")).exists()
                && t0.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn run(cmd: &mut Command, what: &str) {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn slurm_conf(dir: &Path, host: &str) -> String {
    let d = dir.display();
    format!(
        "ClusterName=mpdccptest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmUser=root\nSlurmdUser=root\n\
         SlurmctldPort={}\nSlurmdPort={}\n\
         AuthType=auth/munge\nAuthInfo=socket={d}/munge.sock\nCredType=cred/munge\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
         JobCompType=jobcomp/none\nSchedulerType=sched/builtin\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
         MpiDefault=none\nReturnToService=2\n\
         NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
         PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
        free_port(),
        free_port(),
    )
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_job_array_on_a_one_node_slurm_cluster_equals_the_local_sweep() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let tools: Vec<Option<PathBuf>> = ["munged", "slurmctld", "slurmd", "sbatch", "sinfo"]
        .iter()
        .map(|t| which(t))
        .collect();
    if !is_root() || tools.iter().any(Option::is_none) {
        let why = "needs root and slurm-wlm + munge (apt-get install -y slurm-wlm munge)";
        panic!("the Slurm test cannot run: {why}");
    }
    let t_start = Instant::now();
    let [munged, slurmctld, slurmd, sbatch, sinfo] =
        [0, 1, 2, 3, 4].map(|i| tools[i].clone().expect("checked"));
    let root = tmp("sweep-slurm");
    let cluster = Cluster {
        dir: root.join("cluster"),
    };
    let cdir = cluster.dir.clone();
    for d in ["state", "spool"] {
        std::fs::create_dir_all(cdir.join(d)).expect("mkdir");
    }
    // A fresh munge key: 1024 random bytes, readable by root only.
    let mut key = vec![0u8; 1024];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .expect("urandom");
    }
    let key_file = cdir.join("munge.key");
    std::fs::write(&key_file, &key).expect("key");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    // slurmd finds its node by the short host name (gethostname).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_owned();
    let conf = cdir.join("slurm.conf");
    std::fs::write(&conf, slurm_conf(&cdir, &host)).expect("slurm.conf");
    let p = |f: &str| cdir.join(f);
    run(
        Command::new(&munged)
            .arg("--force")
            .arg(format!("--key-file={}", key_file.display()))
            .arg(format!("--socket={}", p("munge.sock").display()))
            .arg(format!("--log-file={}", p("munged.log").display()))
            .arg(format!("--pid-file={}", p("munged.pid").display()))
            .arg(format!("--seed-file={}", p("munged.seed").display())),
        "munged",
    );
    run(
        Command::new(&slurmctld).arg("-i").env("SLURM_CONF", &conf),
        "slurmctld",
    );
    run(Command::new(&slurmd).env("SLURM_CONF", &conf), "slurmd");
    // The node registers within a few seconds.
    let t0 = Instant::now();
    loop {
        let o = Command::new(&sinfo)
            .args(["-h", "-o", "%T"])
            .env("SLURM_CONF", &conf)
            .output()
            .expect("sinfo");
        let state = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        if state == "idle" {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "node not idle after 60 s (sinfo: `{state}`); logs in {}",
            cdir.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let t_cluster = t_start.elapsed();

    let (local, array) = (root.join("local"), root.join("array"));
    let mut slurm = sweep_args();
    slurm.push("--slurm".into());
    sweep_ok(&slurm, &array);
    let t_submit = Instant::now();
    let mut child = Command::new(&sbatch)
        .arg("--wait")
        .arg(array.join("sweep.sbatch"))
        .env("SLURM_CONF", &conf)
        .spawn()
        .expect("sbatch");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t_submit.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            panic!(
                "the job array did not finish in 600 s; logs in {}",
                cdir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        status.success(),
        "sbatch --wait: {status}; logs in {}",
        array.join("slurm").display()
    );
    let t_array = t_submit.elapsed();
    let logs = std::fs::read_dir(array.join("slurm"))
        .expect("slurm logs")
        .count();
    assert_eq!(logs, CELLS, "one log per array task");
    let o = mpdccp(
        &["sweep", "--collect", "--out", &array.display().to_string()].map(String::from),
        Path::new("/"),
    );
    assert!(
        o.status.success(),
        "collect: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    sweep_ok(&sweep_args(), &local);
    assert_same_tree(&local, &array);
    eprintln!(
        "Slurm test: cluster up in {:.1} s, array of {CELLS} in {:.1} s, total {:.1} s",
        t_cluster.as_secs_f64(),
        t_array.as_secs_f64(),
        t_start.elapsed().as_secs_f64()
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&root);
}
