//! Stand-ins for pyo3-stub-gen's attribute macros, for a build of `pinring._pinring`
//! without the `stubs` feature (`pip install ./python`): `#[gen_stub_pyclass(...)]`,
//! `#[gen_stub_pymethods]` and `#[gen_stub_pyfunction(...)]` ignore their arguments and
//! give their item back with every `#[gen_stub(...)]` helper attribute removed (on
//! methods, functions and their parameters), which only pyo3-stub-gen's macros would
//! otherwise consume. The Python package picks these or pyo3-stub-gen's by its `stubs`
//! feature (`python/src/stub_attrs.rs`); the stubs themselves are generated with the
//! feature on (`python/src/bin/stub_gen.rs`).

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// `#[gen_stub_pyclass]` without stubs: the struct or enum as written, less its
/// `#[gen_stub(...)]` attributes.
#[proc_macro_attribute]
pub fn gen_stub_pyclass(_args: TokenStream, item: TokenStream) -> TokenStream {
    without_gen_stub(item)
}

/// `#[gen_stub_pymethods]` without stubs: the `impl` block as written, less the
/// `#[gen_stub(...)]` attributes of its methods and their parameters.
#[proc_macro_attribute]
pub fn gen_stub_pymethods(_args: TokenStream, item: TokenStream) -> TokenStream {
    without_gen_stub(item)
}

/// `#[gen_stub_pyfunction]` without stubs: the function as written, less the
/// `#[gen_stub(...)]` attributes of it and its parameters.
#[proc_macro_attribute]
pub fn gen_stub_pyfunction(_args: TokenStream, item: TokenStream) -> TokenStream {
    without_gen_stub(item)
}

/// `tokens` with every outer attribute `#[gen_stub]` or `#[gen_stub(...)]` removed, at
/// any depth; everything else (other attributes and doc comments included) unchanged.
fn without_gen_stub(tokens: TokenStream) -> TokenStream {
    let mut out = Vec::new();
    let mut tokens = tokens.into_iter().peekable();
    while let Some(token) = tokens.next() {
        match token {
            TokenTree::Punct(ref hash) if hash.as_char() == '#' => {
                if matches!(tokens.peek(), Some(TokenTree::Group(attr)) if is_gen_stub(attr)) {
                    tokens.next();
                } else {
                    out.push(token);
                }
            }
            TokenTree::Group(group) => {
                let mut inner = Group::new(group.delimiter(), without_gen_stub(group.stream()));
                inner.set_span(group.span());
                out.push(TokenTree::Group(inner));
            }
            other => out.push(other),
        }
    }
    out.into_iter().collect()
}

/// Whether `attr`, the bracketed part of an outer attribute, is `[gen_stub]` or
/// `[gen_stub(...)]`.
fn is_gen_stub(attr: &Group) -> bool {
    if attr.delimiter() != Delimiter::Bracket {
        return false;
    }
    let mut inside = attr.stream().into_iter();
    let named =
        matches!(inside.next(), Some(TokenTree::Ident(name)) if name.to_string() == "gen_stub");
    named
        && match inside.next() {
            None => true,
            Some(TokenTree::Group(args)) => {
                args.delimiter() == Delimiter::Parenthesis && inside.next().is_none()
            }
            Some(_) => false,
        }
}
