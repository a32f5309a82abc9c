//! No stuck timers: with the connection's timer table,
//! `handle_timeout` moves every deadline it has seen past `now`, so the
//! simulator never has to nudge a connection that keeps asking to be woken
//! at the current instant. Every scenario of the repository, cut to its
//! first 30 s (the long E4 runs only repeat their steady state), runs with
//! zero spin breaks.

use mpdccp_model::scenario::Scenario;

#[test]
fn no_scenario_needs_a_spin_break() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("scenarios directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "scenarios found: {}", names.len());
    for path in names {
        let mut s = Scenario::load(&path).expect("scenario loads");
        s.duration_s = s.duration_s.min(30.0);
        s.window.retain(|w| w.to_s <= s.duration_s);
        let out = mpdccp_sim::run(&s, None, |_| {}).expect("simulation runs");
        assert_eq!(
            out.stats.spin_breaks,
            0,
            "{}: a connection asked to be woken at an instant it had already handled",
            path.display()
        );
    }
}
