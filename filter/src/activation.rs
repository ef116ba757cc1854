//! What one evaluation reads: the hook's parsed body, its headers and the gateway's facts
//! about it. Everything is borrowed, so an evaluation never copies the body.

/// The variables an expression sees. No `Debug`: body and headers may hold secrets, and a
/// derived `Debug` would put them in whatever log formats an `Activation`.
#[derive(Clone, Copy)]
pub struct Activation<'a> {
    /// The JSON body; `None` when the body is not JSON, and then `body` is `null`.
    pub body: Option<&'a serde_json::Value>,
    /// Header names already lower-case. A repeated name is one `headers` entry whose value
    /// is the values joined with ", ", in the order they came.
    pub headers: &'a [(String, String)],
    pub source: &'a str,
    pub tenant: &'a str,
    /// "ok", "failed" or "skipped".
    pub verification: &'a str,
    /// Unix milliseconds, a CEL int.
    pub received_at: u64,
    /// Body bytes, a CEL int.
    pub size: u64,
}
