//! The fake kubelet's pod addresses and timestamps.

fn ordinal(pod: &str) -> Option<u8> {
    pod.rsplit_once('-')?.1.parse().ok()
}

/// `127.0.0.(base + ordinal)`; a pod without an ordinal (a Deployment's) gets an address in
/// `127.1.0.0/16` from a hash of its name.
pub fn pod_ip(base: u8, pod: &str) -> Option<String> {
    let Some(o) = ordinal(pod) else {
        let h = pod.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        return Some(format!("127.1.{}.{}", (h >> 8) & 0xff, (h & 0x7f) + 1));
    };
    let n = base.checked_add(o)?;
    (n < 255).then(|| format!("127.0.0.{n}"))
}

pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
