//! Named choices of the configuration (congestion control, scheduler,
//! reordering): one enum per kind is the one list of valid names, used by
//! parsing, help texts, validation and results.
//!
//! Names parse case-insensitively and accept `_` for `-`
//! (`Active_Standby` = `active-standby`); an unknown name is an
//! [`UnknownName`] error that lists the valid ones.

use std::fmt;

/// A name that is not one of the valid names of its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName {
    /// What was being named ("congestion control", "scheduler", …).
    pub kind: &'static str,
    /// The name as given.
    pub name: String,
    /// Every accepted name, canonical names first, then aliases.
    pub valid: Vec<&'static str>,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}` (expected one of {})",
            self.kind,
            self.name,
            self.valid.join(", ")
        )
    }
}

impl std::error::Error for UnknownName {}

/// True when `given` names `name` (case-insensitive, `_` for `-`).
pub(crate) fn same_name(name: &str, given: &str) -> bool {
    let given = given.trim();
    name.len() == given.len()
        && name
            .bytes()
            .zip(given.bytes())
            .all(|(a, b)| a.eq_ignore_ascii_case(&b) || (a == b'-' && b == b'_'))
}

/// Defines a `Copy` enum of named choices with `ALL`, `name()`, `Display`,
/// `FromStr` (aliases included, errors list the valid names) and, with the
/// `serde` feature, (de)serialisation as the name.
macro_rules! named_kind {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $var:ident = $name:literal, )+
        }
        aliases { $( $alias:literal => $target:ident, )* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty {
            $( $(#[$vmeta])* $var, )+
        }

        impl $ty {
            /// Every choice, in the order help texts and errors list them.
            pub const ALL: &'static [$ty] = &[$($ty::$var),+];
            /// Accepted alternative names and the choice each selects.
            pub const ALIASES: &'static [(&'static str, $ty)] = &[$(($alias, $ty::$target)),*];

            /// The canonical name (config files, CLI, results).
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$var => $name,)+
                }
            }

            /// Every accepted name: canonical names, then aliases.
            pub fn valid_names() -> Vec<&'static str> {
                Self::ALL
                    .iter()
                    .map(|k| k.name())
                    .chain(Self::ALIASES.iter().map(|(a, _)| *a))
                    .collect()
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::kind::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .map(|k| (k.name(), *k))
                    .chain(Self::ALIASES.iter().copied())
                    .find(|(n, _)| $crate::kind::same_name(n, s))
                    .map(|(_, k)| k)
                    .ok_or_else(|| $crate::kind::UnknownName {
                        kind: $what,
                        name: s.to_owned(),
                        valid: Self::valid_names(),
                    })
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use named_kind;

#[cfg(test)]
mod tests {
    use super::same_name;

    #[test]
    fn names_match_case_insensitively_with_underscores() {
        assert!(same_name("active-standby", "Active_Standby"));
        assert!(same_name("cpf", " CPF "));
        assert!(!same_name("cpf", "cp"));
        assert!(!same_name("active_standby", "active-standby"));
    }
}
