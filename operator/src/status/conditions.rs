//! The pieces every status is made of: the three conditions (keeping `lastTransitionTime`
//! while a condition's status holds), their comparison without transition times, `n/m`
//! fractions and RFC 3339 times. Pure functions.
//!
//! May import: `ankusa_crds` only. Every other `status` module builds on this one.

use ankusa_crds::Condition;
use ankusa_crds::condition::{DEGRADED, PROGRESSING, READY};

/// Now, RFC 3339 to the second.
pub fn now_rfc3339() -> String {
    use k8s_openapi::jiff::{Timestamp, Unit};
    Timestamp::now()
        .round(Unit::Second)
        .unwrap_or_else(|_| Timestamp::now())
        .to_string()
}

/// Unix milliseconds as RFC 3339 to the second; `None` for 0 or a time out of range.
pub fn rfc3339_from_ms(ms: u64) -> Option<String> {
    use k8s_openapi::jiff::{Timestamp, Unit};
    let t = Timestamp::from_millisecond(i64::try_from(ms).ok().filter(|m| *m > 0)?).ok()?;
    Some(t.round(Unit::Second).unwrap_or(t).to_string())
}

/// The three conditions every status carries, from (status, reason, message) triples.
pub struct Conds {
    pub ready: (bool, &'static str, String),
    pub progressing: (bool, &'static str, String),
    pub degraded: (bool, &'static str, String),
}

impl Conds {
    /// In effect: Ready for `reason`, nothing under way, nothing wrong.
    pub fn done(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (true, reason, message.clone()),
            progressing: (false, reason, message),
            degraded: (false, "AsExpected", String::new()),
        }
    }

    /// Work under way (`reason`), not Ready yet, nothing wrong.
    pub fn under_way(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (false, reason, message.clone()),
            progressing: (true, reason, message),
            degraded: (false, "AsExpected", String::new()),
        }
    }

    /// Stuck on `reason`: not Ready, Progressing `Blocked`, Degraded.
    pub fn blocked(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (false, reason, message.clone()),
            progressing: (false, "Blocked", message.clone()),
            degraded: (true, reason, message),
        }
    }
}

/// Builds the condition list, keeping each condition's `lastTransitionTime` from `old` when
/// its status did not change.
pub fn conditions(
    old: &[Condition],
    c: Conds,
    generation: Option<i64>,
    now: &str,
) -> Vec<Condition> {
    [
        (READY, c.ready),
        (PROGRESSING, c.progressing),
        (DEGRADED, c.degraded),
    ]
    .into_iter()
    .map(|(t, c)| condition(old, t, c, generation, now))
    .collect()
}

/// One condition of type `type_` from (status, reason, message), keeping its
/// `lastTransitionTime` from `old` when its status did not change.
pub fn condition(
    old: &[Condition],
    type_: &str,
    (status, reason, message): (bool, &str, String),
    generation: Option<i64>,
    now: &str,
) -> Condition {
    let mut cond = Condition::new(type_, status, reason, message);
    cond.observed_generation = generation;
    let prev = old.iter().find(|o| o.type_ == type_);
    cond.last_transition_time = match prev {
        Some(p) if p.status == cond.status && p.last_transition_time.is_some() => {
            p.last_transition_time.clone()
        }
        _ => Some(now.to_string()),
    };
    cond
}

/// Two condition lists are equal but for transition times.
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

/// `n/m`.
pub fn fraction(n: i32, m: i32) -> String {
    format!("{n}/{m}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_transition_time_while_status_holds() {
        let c = || Conds {
            ready: (true, "Programmed", "3/3".into()),
            progressing: (false, "Idle", "".into()),
            degraded: (false, "Healthy", "".into()),
        };
        let first = conditions(&[], c(), Some(1), "2026-01-01T00:00:00Z");
        assert!(
            first
                .iter()
                .all(|x| x.last_transition_time.as_deref() == Some("2026-01-01T00:00:00Z"))
        );
        let second = conditions(&first, c(), Some(2), "2026-01-02T00:00:00Z");
        assert_eq!(
            second[0].last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(second[0].observed_generation, Some(2));
        let mut flipped = c();
        flipped.ready = (false, "Programming", "1/3".into());
        let third = conditions(&second, flipped, Some(2), "2026-01-03T00:00:00Z");
        assert_eq!(third[0].status, "False");
        assert_eq!(
            third[0].last_transition_time.as_deref(),
            Some("2026-01-03T00:00:00Z")
        );
        assert_eq!(
            third[1].last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert!(!same_conditions(&second, &first), "generation differs");
        assert!(same_conditions(
            &conditions(&first, c(), Some(1), "x"),
            &first
        ));
    }

    #[test]
    fn unix_ms_as_rfc3339() {
        assert_eq!(
            rfc3339_from_ms(1_767_225_600_400).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(rfc3339_from_ms(0), None);
        assert_eq!(rfc3339_from_ms(u64::MAX), None);
    }
}
