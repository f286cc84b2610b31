//! What the example tools share: [`say!`], the output that survives a closed stdout; the
//! number parsers and the options several tools take alike ([`args`]); how a tool opens
//! token shards ([`shards`]), picks its backend ([`backend`]), pops its batches
//! ([`drive`]), writes its trace ([`trace`]) and ends ([`exit`]); the training examples'
//! `--ids` log ([`ids_log`]).

pub mod args;
pub mod backend;
pub mod drive;
pub mod exit;
pub mod ids_log;
pub mod shards;
pub mod trace;

/// `println!` that does not panic when stdout is closed (`train_tokens ... | head`): the
/// report is all a tool prints, so a reader that left needs no more of it.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
