//! `assert_source_error!`: the check that an error is a source error of a given kind,
//! shared by the source test crates (each includes this file with `#[macro_use]`, before
//! its other modules).

/// Asserts that `$err` (an `Error`, or a reference to one) is `Error::Source` of this
/// `SourceError` pattern (and, where given, that the guard holds), showing the error's
/// text and its debug form otherwise.
macro_rules! assert_source_error {
    ($err:expr, $pattern:pat $(if $guard:expr)? $(,)?) => {{
        let err: &pinring::Error = &$err;
        assert!(
            matches!(err, pinring::Error::Source($pattern) $(if $guard)?),
            "{err}\n{err:?}"
        );
    }};
}
