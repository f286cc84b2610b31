//! The stand-ins remove the `#[gen_stub(...)]` helper attributes and keep everything else:
//! this file compiles only if they do (a `#[gen_stub]` left on a parameter is an unknown
//! attribute, a dropped `#[cfg]` a second `scaled`), and its checks run what they give back.

use pinring_stub_attrs::{gen_stub_pyclass, gen_stub_pyfunction, gen_stub_pymethods};

/// A class: its own attributes and the `#[gen_stub]` of a field.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[derive(Debug, Default, PartialEq)]
struct Point {
    #[gen_stub(skip)]
    x: i64,
}

#[gen_stub_pymethods]
impl Point {
    /// A method with `#[gen_stub(...)]` on itself and on a parameter.
    #[gen_stub(override_return_type(type_repr = "int"))]
    fn scaled(
        &self,
        #[gen_stub(override_type(type_repr = "int", imports = ("typing",)))] by: i64,
    ) -> i64 {
        self.x * by
    }

    /// Kept: the `#[cfg]` removes this twin (two `scaled` would not compile).
    #[cfg(any())]
    fn scaled(&self, by: i64) -> i64 {
        by
    }

    /// A bare `#[gen_stub]`, and a nested group whose `#[gen_stub]` goes too.
    #[gen_stub]
    fn nested(&self) -> i64 {
        let f = |#[gen_stub(override_type(type_repr = "int"))] y: i64| y + self.x;
        f(1)
    }
}

#[gen_stub_pyfunction(module = "pinring._pinring")]
#[gen_stub(override_return_type(type_repr = "int"))]
fn double(#[gen_stub(override_type(type_repr = "int"))] n: i64) -> i64 {
    2 * n
}

#[test]
fn the_items_come_back_without_their_gen_stub_attributes() {
    let p = Point { x: 3 };
    assert_eq!(p.scaled(4), 12);
    assert_eq!(p.nested(), 4);
    assert_eq!(double(21), 42);
    assert_eq!(Point::default(), Point { x: 0 });
}
