//! The status document as the packet loop builds it: the daemon's own
//! fields as a JSON object, and each connection's entry serialized as soon
//! as it is built.
//!
//! Why not one `serde_json::Value`: a `Value` tree costs about six times
//! its text (a map node, a key string and a 32-byte value per field), and
//! a connection's entry has a few hundred fields. On a server with 1 000
//! clients the whole tree of one status request raised the daemon's RSS by
//! 39 MB for a 2.6 MB document (`mpdccp bench clients`), and the
//! allocator kept most of it. Here at most one connection's tree exists at
//! a time; the published snapshot keeps the entries serialized, a status
//! request writes them out as they are and a scrape parses one at a time.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A status document ([`StatusDoc::to_text`] gives its JSON: the head's
/// fields, then `connections`).
#[derive(Debug, Default, Serialize)]
pub struct StatusDoc {
    #[serde(flatten)]
    pub head: Map<String, Value>,
    pub connections: Vec<Box<RawValue>>,
}

impl StatusDoc {
    /// A document whose head is `head`'s fields (none if it is not an
    /// object) and which has no connections yet.
    pub fn new(head: Value) -> StatusDoc {
        StatusDoc {
            head: match head {
                Value::Object(m) => m,
                _ => Map::new(),
            },
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

impl From<Value> for StatusDoc {
    /// Splits a whole document (as the client daemon builds its one
    /// connection's) into head and serialized connections.
    fn from(mut doc: Value) -> StatusDoc {
        let conns = doc
            .as_object_mut()
            .and_then(|o| o.remove("connections"))
            .and_then(|c| match c {
                Value::Array(a) => Some(a),
                _ => None,
            })
            .unwrap_or_default();
        let mut d = StatusDoc::new(doc);
        for c in &conns {
            d.push_connection(c);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_the_document_it_was_split_from() {
        let v = json!({
            "role": "server",
            "daemon": {"udp_rx_datagrams": 7, "x": 1.5},
            "connections": [{"handle": 1, "paths": [{"id": 0}]}, {"handle": 2, "paths": []}],
            "uptime_s": 3.25,
        });
        let d = StatusDoc::from(v.clone());
        assert_eq!(d.connections.len(), 2);
        assert!(!d.head.contains_key("connections"));
        let back: Value = serde_json::from_str(&d.to_text()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn a_document_without_connections_lists_none() {
        let d = StatusDoc::from(json!({"built": 1}));
        let back: Value = serde_json::from_str(&d.to_text()).unwrap();
        assert_eq!(back, json!({"built": 1, "connections": []}));
        let d = StatusDoc::new(json!("not an object"));
        assert_eq!(d.to_text(), r#"{"connections":[]}"#);
    }
}
