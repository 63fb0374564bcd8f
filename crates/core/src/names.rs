//! Name tables for the enums users type: one table per enum gives both the parser and the printed name, so the
//! two never drift apart and error messages list exactly what is accepted.

use crate::error::UsageError;

/// Names of the values of `T`, canonical name first when a value has several (aliases follow it).
#[derive(Debug)]
pub struct Names<T: 'static>(pub &'static [(&'static str, T)]);

impl<T: Copy + PartialEq> Names<T> {
    /// The value called `name`.
    pub fn parse(&self, name: &str) -> Option<T> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// The canonical name of `value`: the first the table gives it.
    ///
    /// # Panics
    /// When the table lacks `value`, which a unit test of each table rules out.
    pub fn name(&self, value: T) -> &'static str {
        self.0.iter().find(|(_, v)| *v == value).map(|(n, _)| *n).expect("every value has a name in its table")
    }

    /// The value called `name`, or a usage error naming `what` was unknown and every accepted name.
    pub fn parse_or_usage(&self, what: &str, name: &str) -> Result<T, UsageError> {
        self.parse(name)
            .ok_or_else(|| UsageError::new(format!("unknown {what} {name:?} (expected one of: {})", self.list())))
    }

    /// Every accepted name, in table order, for help and error messages: `a, b, c`.
    pub fn list(&self) -> String {
        self.0.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

/// Implements `Display` for enums by their canonical name in a [`Names`] table: `display_by_name!(T => TABLE, …)`.
#[macro_export]
macro_rules! display_by_name {
    ($($t:ty => $table:expr),* $(,)?) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($table.name(*self))
            }
        }
    )*};
}

/// Carries each type through serde as its text: `TryFrom<String>` by its `FromStr` (whose error is a
/// [`UsageError`](crate::error::UsageError)), `From<T> for String` by its `Display`; the type then says
/// `#[serde(try_from = "String", into = "String")]`.
#[macro_export]
macro_rules! serde_by_text {
    ($($t:ty),* $(,)?) => {$(
        impl TryFrom<String> for $t {
            type Error = $crate::error::UsageError;

            fn try_from(text: String) -> Result<Self, Self::Error> {
                text.parse()
            }
        }

        impl From<$t> for String {
            fn from(value: $t) -> String {
                value.to_string()
            }
        }
    )*};
}
