//! [`Counters::of`](super::status::Counters::of): the counts of a stats
//! struct read through its `Serialize`, so every counter a struct of the
//! core gains shows up in `mpdccp status` and the metrics without a list
//! kept in the daemon, and without building JSON on the packet loop.
//!
//! A field that serializes as a whole number (an `Option` of one that is
//! `Some`) is a count; a struct field is a group of such counts one level
//! down (the daemon's `tun_offload`); anything else (floats, strings,
//! sequences, deeper levels) is not a count and is left out. Flattened
//! groups (`ConnStats`) arrive as map entries, named as in their struct.

use std::collections::BTreeMap;
use std::fmt;

use serde::ser;
use serde::Serialize;

/// The counts of one stats struct: its whole-number fields, and its struct
/// fields of whole numbers one level down, each by field name.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub top: BTreeMap<String, u64>,
    pub groups: BTreeMap<String, BTreeMap<String, u64>>,
}

/// The counts of `stats` (none if it is not a struct).
pub(super) fn counts_of<T: Serialize + ?Sized>(stats: &T) -> Counts {
    match stats.serialize(Level::Top) {
        Ok(Some(Field::Group(top, groups))) => Counts { top, groups },
        _ => Counts::default(),
    }
}

/// What one value serialized as: a count, or a struct's counts (and, at
/// the top, its groups one level down).
enum Field {
    N(u64),
    Group(
        BTreeMap<String, u64>,
        BTreeMap<String, BTreeMap<String, u64>>,
    ),
}

/// How deep the value is: the stats struct, a field of it, or a field of
/// a group (where only counts are kept).
#[derive(Clone, Copy)]
enum Level {
    Top,
    Field,
    Leaf,
}

impl Level {
    fn below(self) -> Option<Level> {
        match self {
            Level::Top => Some(Level::Field),
            Level::Field => Some(Level::Leaf),
            Level::Leaf => None,
        }
    }
}

/// Never raised by the collector (serde requires the type).
#[derive(Debug)]
pub(super) struct NotCounts(String);

impl fmt::Display for NotCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotCounts {}

impl ser::Error for NotCounts {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        NotCounts(msg.to_string())
    }
}

type Res = Result<Option<Field>, NotCounts>;

/// A struct or map being collected: its counts, its groups, and the key
/// of the entry whose value comes next.
struct Collect {
    level: Level,
    counts: BTreeMap<String, u64>,
    groups: BTreeMap<String, BTreeMap<String, u64>>,
    key: Option<String>,
}

impl Collect {
    fn new(level: Level) -> Collect {
        Collect {
            level,
            counts: BTreeMap::new(),
            groups: BTreeMap::new(),
            key: None,
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: String, value: &T) -> Result<(), NotCounts> {
        let Some(below) = self.level.below() else {
            return Ok(());
        };
        match value.serialize(below)? {
            Some(Field::N(n)) => {
                self.counts.insert(key, n);
            }
            Some(Field::Group(g, _)) => {
                self.groups.insert(key, g);
            }
            None => {}
        }
        Ok(())
    }

    fn done(self) -> Res {
        Ok(Some(Field::Group(self.counts, self.groups)))
    }
}

impl ser::SerializeStruct for Collect {
    type Ok = Option<Field>;
    type Error = NotCounts;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        k: &'static str,
        v: &T,
    ) -> Result<(), NotCounts> {
        self.field(k.to_owned(), v)
    }
    fn end(self) -> Res {
        self.done()
    }
}

impl ser::SerializeMap for Collect {
    type Ok = Option<Field>;
    type Error = NotCounts;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), NotCounts> {
        self.key = k.serialize(KeyName)?;
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NotCounts> {
        match self.key.take() {
            Some(k) => self.field(k, v),
            None => Ok(()),
        }
    }
    fn end(self) -> Res {
        self.done()
    }
}

/// Sequences, tuples and enum variants with data: not counts.
struct Skip;

macro_rules! skip_compound {
    ($($tr:ident :: $m:ident),*) => {$(
        impl ser::$tr for Skip {
            type Ok = Option<Field>;
            type Error = NotCounts;
            fn $m<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), NotCounts> {
                Ok(())
            }
            fn end(self) -> Res {
                Ok(None)
            }
        }
    )*};
}
skip_compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeStructVariant for Skip {
    type Ok = Option<Field>;
    type Error = NotCounts;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        _: &T,
    ) -> Result<(), NotCounts> {
        Ok(())
    }
    fn end(self) -> Res {
        Ok(None)
    }
}

/// Scalars that are not whole numbers: no count.
macro_rules! not_a_count {
    ($($m:ident($t:ty)),*) => {$(
        fn $m(self, _: $t) -> Res {
            Ok(None)
        }
    )*};
}

/// Whole numbers: a count (negative ones are not).
macro_rules! a_count {
    ($($m:ident($t:ty)),*) => {$(
        fn $m(self, v: $t) -> Res {
            Ok(u64::try_from(v).ok().map(Field::N))
        }
    )*};
}

impl ser::Serializer for Level {
    type Ok = Option<Field>;
    type Error = NotCounts;
    type SerializeSeq = Skip;
    type SerializeTuple = Skip;
    type SerializeTupleStruct = Skip;
    type SerializeTupleVariant = Skip;
    type SerializeMap = Collect;
    type SerializeStruct = Collect;
    type SerializeStructVariant = Skip;

    a_count!(
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128)
    );
    not_a_count!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str)
    );
    fn serialize_none(self) -> Res {
        Ok(None)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Res {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Res {
        Ok(None)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Res {
        Ok(None)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Res {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Res {
        Ok(None)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Skip, NotCounts> {
        Ok(Skip)
    }
    fn serialize_tuple(self, _: usize) -> Result<Skip, NotCounts> {
        Ok(Skip)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Skip, NotCounts> {
        Ok(Skip)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Skip, NotCounts> {
        Ok(Skip)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Collect, NotCounts> {
        Ok(Collect::new(self))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Collect, NotCounts> {
        Ok(Collect::new(self))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Skip, NotCounts> {
        Ok(Skip)
    }
}

/// A map key: its text when it is a string (the field names of flattened
/// groups), else `None` (the entry is left out).
struct KeyName;

type Key = Result<Option<String>, NotCounts>;
type NoKey = ser::Impossible<Option<String>, NotCounts>;

/// Keys that are not strings: the entry is left out.
macro_rules! not_a_name {
    ($($m:ident($t:ty)),*) => {$(
        fn $m(self, _: $t) -> Key {
            Ok(None)
        }
    )*};
}

/// Compound keys: serde_json refuses them too.
macro_rules! no_compound_key {
    ($($m:ident($($t:ty),*) -> $r:ident),*) => {$(
        fn $m(self, $(_: $t),*) -> Result<NoKey, NotCounts> {
            Err(ser::Error::custom(concat!("a map key of ", stringify!($r))))
        }
    )*};
}

impl ser::Serializer for KeyName {
    type Ok = Option<String>;
    type Error = NotCounts;
    type SerializeSeq = NoKey;
    type SerializeTuple = NoKey;
    type SerializeTupleStruct = NoKey;
    type SerializeTupleVariant = NoKey;
    type SerializeMap = NoKey;
    type SerializeStruct = NoKey;
    type SerializeStructVariant = NoKey;

    fn serialize_str(self, v: &str) -> Key {
        Ok(Some(v.to_owned()))
    }
    not_a_name!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str)
    );
    fn serialize_none(self) -> Key {
        Ok(None)
    }
    fn serialize_unit(self) -> Key {
        Ok(None)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Key {
        v.serialize(self)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, v: &'static str) -> Key {
        Ok(Some(v.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Key {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Key {
        Ok(None)
    }
    no_compound_key!(
        serialize_seq(Option<usize>) -> seq,
        serialize_tuple(usize) -> tuple,
        serialize_tuple_struct(&'static str, usize) -> tuple_struct,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> tuple_variant,
        serialize_map(Option<usize>) -> map,
        serialize_struct(&'static str, usize) -> struct,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> struct_variant
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::status::Counters;

    #[derive(Serialize)]
    struct Inner {
        a: u64,
        deeper: Leafy,
    }

    #[derive(Serialize)]
    struct Leafy {
        x: u64,
    }

    #[derive(Serialize)]
    struct Flat {
        f: u32,
    }

    #[derive(Serialize)]
    struct Stats {
        n: u64,
        some: Option<u64>,
        none: Option<u64>,
        ratio: f64,
        negative: i64,
        name: &'static str,
        list: Vec<u64>,
        group: Inner,
        #[serde(flatten)]
        flat: Flat,
        #[serde(skip)]
        _hidden: u64,
    }

    /// The counts are those the struct's JSON held as whole numbers (and
    /// objects of them one level down): what `mpdccp status` has always
    /// listed.
    #[test]
    fn counts_are_the_whole_numbers_one_level_deep() {
        let s = Stats {
            n: 1,
            some: Some(2),
            none: None,
            ratio: 0.5,
            negative: -1,
            name: "x",
            list: vec![3],
            group: Inner {
                a: 4,
                deeper: Leafy { x: 5 },
            },
            flat: Flat { f: 6 },
            _hidden: 7,
        };
        let want = serde_json::json!({"n": 1, "some": 2, "group": {"a": 4}, "f": 6});
        assert_eq!(serde_json::to_value(Counters::of(&s)).unwrap(), want);
        let conn = mpdccp_proto::conn::ConnStats::default();
        let json = serde_json::to_value(conn).unwrap();
        let c = Counters::of(&conn);
        assert_eq!(c.0.len(), json.as_object().unwrap().len());
        assert_eq!(serde_json::to_value(&c).unwrap(), json);
    }
}
