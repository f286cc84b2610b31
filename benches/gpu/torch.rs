//! The PyTorch peers' figures (`TORCH\t<key>\t<value>` lines from
//! `benches/torch_dataloader.py`), quoted beside pinring's.

use std::collections::HashMap;

pub fn read_torch(path: Option<&str>) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return out;
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if let ["TORCH", key, value, ..] = f.as_slice() {
            if let Ok(v) = value.parse::<f64>() {
                out.insert((*key).to_string(), v);
            }
        }
    }
    out
}

pub fn torch_ref(torch: &HashMap<String, f64>, key: &str, fmt: impl Fn(f64) -> String) -> String {
    torch.get(key).map_or("not run".into(), |&v| fmt(v))
}
