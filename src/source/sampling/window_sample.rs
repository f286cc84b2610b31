//! [`window_sample!`]: the [`Decode`](crate::Decode) items every decoder of sampler
//! [`Window`](super::window::Window)s writes alike.

/// Declares, inside an `impl Decode for ...` block, `type Sample = Window<$file>` and the
/// `identify` and `describe` every decoder of windows gives: the window's id and epoch,
/// and its [`Window::describe`](super::window::Window::describe) (one row with its id, its
/// step where it has one). The decoder writes `decode` (and anything else) itself.
macro_rules! window_sample {
    ($file:ty) => {
        type Sample = $crate::source::sampling::window::Window<$file>;

        fn identify(window: &Self::Sample) -> Option<(u64, u64)> {
            Some((window.id(), window.epoch()))
        }

        fn describe(window: &Self::Sample, out: &mut $crate::describe::Describe<'_>) {
            window.describe(out);
        }
    };
}

pub(crate) use window_sample;
