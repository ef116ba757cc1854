//! `Metrics::node`: the node as its probes and its volume see it, set at scrape time
//! (`collect`): `ankusa_ready` (what `GET /ready` would answer) and the free and total bytes
//! of the filesystem holding the store.

use prometheus::{IntGauge, Registry};

use super::register::gauge;

pub struct NodeMetrics {
    /// 1 when `GET /ready` would answer 200, else 0.
    pub ready: IntGauge,
    pub volume_free_bytes: IntGauge,
    pub volume_size_bytes: IntGauge,
}

impl NodeMetrics {
    pub fn new(r: &Registry) -> NodeMetrics {
        NodeMetrics {
            ready: gauge(
                r,
                "ankusa_ready",
                "1 when GET /ready would answer 200 (every listener bound, the store writable, the intake log ready), else 0",
            ),
            volume_free_bytes: gauge(
                r,
                "ankusa_store_volume_free_bytes",
                "Bytes free to the gateway on the filesystem holding the store (statvfs)",
            ),
            volume_size_bytes: gauge(
                r,
                "ankusa_store_volume_size_bytes",
                "Total bytes of the filesystem holding the store (statvfs)",
            ),
        }
    }
}

/// (free to an unprivileged writer, total) bytes of the filesystem holding `path`, or `None`
/// when `statvfs` fails (the gauges then keep their last value).
// The fields are u64 on 64-bit Linux but u32 on 32-bit targets: the casts are for those.
#[allow(clippy::unnecessary_cast)]
pub fn volume_bytes(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a writable
    // `statvfs` the call fills in full when it returns 0, and is read only then.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: initialised by the successful call above.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize as u64;
    Some((
        (st.f_bavail as u64).saturating_mul(frsize),
        (st.f_blocks as u64).saturating_mul(frsize),
    ))
}

#[cfg(test)]
mod tests {
    use super::volume_bytes;

    #[test]
    fn a_directory_has_a_volume_and_a_missing_one_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let (free, size) = volume_bytes(dir.path()).unwrap();
        assert!(size > 0 && free <= size, "free {free} size {size}");
        assert_eq!(volume_bytes(&dir.path().join("missing")), None);
    }
}
