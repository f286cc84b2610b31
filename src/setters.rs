//! [`setters!`]: the builder methods that only store what they are given.

/// Declares builder methods that only store their arguments and hand the builder back.
/// Each entry
///
/// ```text
/// /// docs
/// name(arg: Type, ...) => field.path = value, ...;
/// ```
///
/// becomes `pub fn name(mut self, arg: Type, ...) -> Self` (with the docs and any other
/// attributes written before it) that sets each `self.field.path` to its `value`, an
/// expression of the arguments (`n`, `Some(n)`, `cores.into_iter().collect()`). A method
/// that checks, adds to or derives anything is written out where it belongs.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $name:ident($($arg:ident: $ty:ty),+) => $($($place:ident).+ = $value:expr),+;
    )*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $($arg: $ty),+) -> Self {
                $(self.$($place).+ = $value;)+
                self
            }
        )*
    };
}

pub(crate) use setters;
