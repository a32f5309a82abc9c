//! The status document as the packet loop builds it: the daemon's own
//! fields typed ([`StatusHead`]), and each connection's entry serialized
//! as soon as it is built.
//!
//! Why the entries stay serialized: a connection's entry has a few hundred
//! fields, most of them counters by name, and a tree of them costs several
//! times its text (a `serde_json::Value` tree about six times: on a server
//! with 1 000 clients it raised the daemon's RSS by 39 MB for a 2.6 MB
//! document, `mpdccp bench clients`, and the allocator kept most of it).
//! Here at most one connection's entry exists at a time; the published
//! snapshot keeps the entries as text, a status request writes them out as
//! they are and a scrape reads one [`super::status::ConnStatus`] at a time.

use serde::ser::{Error as _, SerializeMap, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

use super::status::StatusHead;

/// A status document: [`super::status::Status`] with its connections kept
/// serialized (the same JSON).
#[derive(Debug, Default)]
pub struct StatusDoc {
    pub head: StatusHead,
    pub connections: Vec<Box<RawValue>>,
}

/// The head's fields sorted by name (at every level), then
/// `connections`: the order the document has always had, so its text
/// does not change with the declaration order of the types.
impl Serialize for StatusDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let head = serde_json::to_value(&self.head).map_err(S::Error::custom)?;
        let fields = head.as_object().into_iter().flatten();
        let mut m = s.serialize_map(None)?;
        for (k, v) in fields {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("connections", &self.connections)?;
        m.end()
    }
}

impl StatusDoc {
    /// A document of `head` without connections yet.
    pub fn new(head: StatusHead) -> StatusDoc {
        StatusDoc {
            head,
            connections: Vec::new(),
        }
    }

    /// Appends a connection's entry, serialized now.
    pub fn push_connection<T: Serialize>(&mut self, entry: &T) {
        // The status types always serialize, to valid JSON.
        if let Ok(raw) = serde_json::value::to_raw_value(entry) {
            self.connections.push(raw);
        }
    }

    /// The document's JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::status::{Counters, Status};
    use serde_json::{json, Value};

    #[test]
    fn text_is_the_head_then_the_connections_as_pushed() {
        let mut head = StatusHead {
            role: "server".into(),
            uptime_s: 3.25,
            daemon: Counters::from_pairs([("udp_rx_datagrams", 7)]),
            ..StatusHead::default()
        };
        head.tun.name = "tun0".into();
        let mut d = StatusDoc::new(head.clone());
        d.push_connection(&json!({"handle": 1, "paths": [{"id": 0}]}));
        d.push_connection(&json!({"handle": 2, "paths": []}));
        let v: Value = serde_json::from_str(&d.to_text()).unwrap();
        assert_eq!(v["role"], "server");
        assert_eq!(v["uptime_s"], 3.25);
        assert_eq!(v["daemon"], json!({"udp_rx_datagrams": 7}));
        assert_eq!(v["connections"][0]["paths"][0]["id"], 0);
        assert_eq!(v["connections"][1]["handle"], 2);
        assert!(v.get("endpoint").is_none() && v.get("auth").is_none());
        let back: Status = serde_json::from_str(&d.to_text()).unwrap();
        assert_eq!(back.head, head);
        assert_eq!(back.connections.len(), 2);
    }

    #[test]
    fn a_document_without_connections_lists_none() {
        let v: Value = serde_json::from_str(&StatusDoc::default().to_text()).unwrap();
        assert_eq!(v["connections"], json!([]));
    }
}
