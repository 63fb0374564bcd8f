//! Name tables for the enums users type: one table per enum gives both the parser and the printed name, so the
//! two never drift apart and error messages list exactly what is accepted.

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

    /// Every accepted name, in table order, for help and error messages: `a, b, c`.
    pub fn list(&self) -> String {
        self.0.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}
