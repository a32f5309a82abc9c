//! The labels the plots carry, shared by the scenario (which names its
//! events) and the plots (which draw them): markers and number labels.

/// A labelled instant drawn as a dashed vertical line (a rate change, an
/// outage's start or end).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marker {
    pub at_s: f64,
    pub label: String,
}

/// A tick label: at most three decimals, trailing zeros and a bare "." cut
/// ("10", "0.5", "2.25"), never "-0".
pub fn tick_label(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}
