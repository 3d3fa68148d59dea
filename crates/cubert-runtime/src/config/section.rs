//! How one `section.key = value` reaches its setting, with serde doing the mapping.
//!
//! A section is a struct deserialized by serde (`#[serde(default, deny_unknown_fields)]`,
//! a `deserialize_with` helper from `values` on each field). Applying one key:
//!
//! 1. the key is looked up among the keys serde reads for the section (its field names, as
//!    serde reports them), else it is an unknown key;
//! 2. the pair is written as a one-line TOML document and read by toml into the section,
//!    whose other settings take their defaults: the same path a whole file takes, so the
//!    value meets the field's own helper and its range;
//! 3. only that field is moved into the live section (see [`Section::take_field`]).
//!
//! A refused value therefore changes nothing, and every other key still applies. The
//! `settings!` macro declares the structs and writes [`Section::take_field`] (and, for the
//! whole configuration, the section lookup) from the same field list, so no key is listed
//! twice.

use serde::de::{DeserializeOwned, Deserializer, Error as _, Visitor};

/// A `[section]` of the configuration: a struct serde reads key by key.
pub(crate) trait Section: Default + DeserializeOwned {
    /// Moves the field at `index` (in declaration order, which is the order of
    /// [`field_names`]) from `from` into `self`.
    fn take_field(&mut self, index: usize, from: Self);
}

/// Applying keys to a section whose type isn't known statically.
pub(crate) trait ApplyKey {
    /// Applies `key = value`. On error nothing changes and the message says what was
    /// expected.
    fn apply_key(&mut self, key: &str, value: &toml::Value) -> Result<(), String>;

    /// The keys of the section.
    #[cfg(test)]
    fn keys(&self) -> &'static [&'static str];
}

impl<S: Section> ApplyKey for S {
    fn apply_key(&mut self, key: &str, value: &toml::Value) -> Result<(), String> {
        let index = field_names::<S>()
            .iter()
            .position(|known| *known == key)
            .ok_or_else(|| format!("unknown key `{key}`"))?;
        let read: S = read_entry(key, value)?;
        self.take_field(index, read);
        Ok(())
    }

    #[cfg(test)]
    fn keys(&self) -> &'static [&'static str] {
        field_names::<S>()
    }
}

/// `S` with `key = value` read into it and every other setting at its default.
fn read_entry<S: DeserializeOwned>(key: &str, value: &toml::Value) -> Result<S, String> {
    let mut entry = toml::Table::new();
    entry.insert(key.to_owned(), value.clone());
    // Through a document rather than `toml::Value`'s own deserializer, which hands a
    // datetime over as a plain string (a path setting would then take it).
    let document = toml::to_string(&entry).map_err(|error| error.to_string())?;
    toml::from_str(&document).map_err(|error| error.message().to_owned())
}

/// The keys serde reads for the struct `T`, in declaration order (its `FIELDS`: no field
/// of a section is skipped or has an alias, so the list and the fields match one to one).
pub(crate) fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    /// A deserializer that only records the field names a struct asks for.
    struct Names<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Names<'_> {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("field names recorded"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut names: &'static [&'static str] = &[];
    // Always an error: `Names` stops the struct once it has named its fields.
    let _stopped = T::deserialize(Names(&mut names));
    names
}

/// Declares a settings struct as written, and from the same field list:
///
/// - `settings! { keys: struct ... }`: a section, whose fields are keys; implements
///   [`Section`];
/// - `settings! { sections: struct ... }`: the whole configuration, whose fields are
///   sections (each a [`Section`]); adds `fn section_mut(&mut self, index)`, the section at
///   `index` of serde's field order.
///
/// Fields are matched by position with serde's field list, so none may be skipped by serde
/// or have an alias (`rename` is fine).
macro_rules! settings {
    (
        keys:
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $crate::config::Section for $name {
            fn take_field(&mut self, index: usize, from: Self) {
                const DECLARED: &[&str] = &[$(stringify!($field)),*];
                match DECLARED.get(index).copied() {
                    $( Some(stringify!($field)) => self.$field = from.$field, )*
                    _ => {}
                }
            }
        }
    };
    (
        sections:
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $name {
            /// The section at `index` of serde's field order.
            fn section_mut(&mut self, index: usize) -> Option<&mut dyn $crate::config::ApplyKey> {
                const DECLARED: &[&str] = &[$(stringify!($field)),*];
                match DECLARED.get(index).copied() {
                    $( Some(stringify!($field)) => Some(&mut self.$field), )*
                    _ => None,
                }
            }
        }
    };
}

pub(crate) use settings;
