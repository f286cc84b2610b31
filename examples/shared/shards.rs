//! The token shards a tool's PATHs name.

use std::sync::Arc;

use pinring::source::{TokenShard, TokenShards};

/// The shards `paths` name: each a shard file, or a pattern (`*`, `?` in the file name)
/// expanded in place.
pub fn open(paths: &[String]) -> pinring::Result<TokenShards> {
    let mut shards: Vec<Arc<TokenShard>> = Vec::new();
    for p in paths {
        if p.contains(['*', '?']) {
            shards.extend(TokenShards::glob(p)?.shards().iter().cloned());
        } else {
            shards.push(Arc::new(TokenShard::open(p)?));
        }
    }
    TokenShards::from_shards(shards)
}
