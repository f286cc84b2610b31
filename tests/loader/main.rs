//! `pinring::Loader`: the run of every source kind over a pipeline — steps, epochs, start
//! and skipped steps, one `State` saved, merged and resumed on another world size, the
//! state a trainer consumed behind a prefetch thread, and the run's settings refused
//! where they do not fit.

mod helpers;

mod documents;
mod errors;
mod guard;
mod mixture;
mod node_share;
mod reshard;
mod windows;
