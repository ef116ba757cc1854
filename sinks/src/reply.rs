//! Reading a broker API's reply (SQS, Pub/Sub, the metadata server) with a size cap: the reply
//! is parsed for a status or an error code, and an endpoint that streams without end (a
//! misconfigured proxy, a hostile private endpoint) must not grow the gateway's memory.

/// Replies of these APIs are a few KiB; anything past this is not one of them.
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// The reply body as text (lossy UTF-8), at most `max` bytes; `Err` names what failed.
pub async fn text(mut resp: reqwest::Response, max: usize) -> Result<String, String> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(format!("reply_too_large: over {max} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("transport: {}", e.without_url()))?
    {
        if body.len() + chunk.len() > max {
            return Err(format!("reply_too_large: over {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}
