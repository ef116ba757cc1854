//! The dead-index cursor: what a DLQ page's `next_cursor` and a replay job's `cursor` hold.

use base64::Engine;

use crate::keys;

/// A position in the dead index: (dead_at, seq, sink) of the last key seen. Travels as an
/// opaque string (a DLQ page's `next_cursor`, a replay job's `cursor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadCursor {
    dead_at: u64,
    seq: u64,
    sink: u16,
}

impl DeadCursor {
    /// The position of the row (`seq`, `sink`) dead at `dead_at` (a page after it starts
    /// below it).
    pub fn new(dead_at: u64, seq: u64, sink: u16) -> DeadCursor {
        DeadCursor { dead_at, seq, sink }
    }

    pub fn encode(&self) -> String {
        let mut b = [0u8; 18];
        b[..8].copy_from_slice(&self.dead_at.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..].copy_from_slice(&self.sink.to_be_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    }

    /// `None` for anything `encode` did not write (a client's guess, a damaged job row).
    pub fn decode(s: &str) -> Option<DeadCursor> {
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        if b.len() != 18 {
            return None;
        }
        Some(DeadCursor {
            dead_at: keys::be64(&b[..8])?,
            seq: keys::be64(&b[8..16])?,
            sink: u16::from_be_bytes([b[16], b[17]]),
        })
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn sink(&self) -> u16 {
        self.sink
    }

    pub fn dead_at(&self) -> u64 {
        self.dead_at
    }

    /// The index key it stands at: in the tenant's index when a tenant is named.
    pub fn key(&self, tenant: Option<&str>) -> Vec<u8> {
        match tenant {
            Some(t) => keys::dead_tenant(t, self.dead_at, self.seq, self.sink),
            None => keys::dead(self.dead_at, self.seq, self.sink),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_text() {
        let c = DeadCursor::new(u64::MAX, 7, 3);
        assert_eq!(DeadCursor::decode(&c.encode()), Some(c));
        assert_eq!(keys::parse_dead(&c.key(None)), Some((u64::MAX, 7, 3)));
        assert_eq!(
            keys::parse_dead_tenant(&c.key(Some("acme"))),
            Some(("acme", u64::MAX, 7, 3))
        );
        for bad in ["", "AAAA", "not a cursor", &format!("{}A", c.encode())] {
            assert_eq!(DeadCursor::decode(bad), None, "{bad}");
        }
    }
}
