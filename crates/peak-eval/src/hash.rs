//! Content keys: what makes two runs "the same" for the caches.

use indexmap::IndexMap;
use peak_backend::DeviceInfo;
use peak_spec::Context;
use sha2::{Digest, Sha256};

/// Hash of everything about a context that can change what a variant computes or how
/// fast: the whole source file, the kernel section and the arrays. The tuning domains,
/// constraints and tolerances are left out on purpose: widening a space must not throw
/// away the measurements already made inside it.
pub fn source_hash(ctx: &Context) -> String {
    let mut h = Sha256::new();
    h.update(b"peak-source-v1\0");
    h.update(ctx.regions.render().as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_string(&(&ctx.manifest.kernel, &ctx.manifest.arrays)).expect("manifest sections serialize").as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// The device and the software stack that compiled and ran on it.
pub fn device_identity(device: &DeviceInfo) -> String {
    let arch = if device.arch.is_empty() { String::new() } else { format!(" {}", device.arch) };
    format!("{} {}{} ({})", device.backend, device.name, arch, device.driver)
}

/// A stable text form of name=value pairs, sorted by name.
pub fn canonical(values: &IndexMap<String, i64>) -> String {
    let mut pairs: Vec<_> = values.iter().collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Hex SHA-256 of several parts, separated so that ("ab","c") and ("a","bc") differ.
pub fn key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

/// Hex SHA-256 of bytes, in full.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert_eq!(key(&["x", "y"]), key(&["x", "y"]));
    }

    #[test]
    fn canonical_ignores_insertion_order() {
        let mut a = IndexMap::new();
        a.insert("b".to_string(), 2);
        a.insert("a".to_string(), 1);
        let mut b = IndexMap::new();
        b.insert("a".to_string(), 1);
        b.insert("b".to_string(), 2);
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), "a=1,b=2");
    }
}
