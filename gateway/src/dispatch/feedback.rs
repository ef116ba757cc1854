//! How replayed rows settle, told to the replayer: the scheduler counts the settled deliveries
//! of rows a replay job moved (`FeedbackTx::record`: delivered, or dead-lettered or parked
//! again) and sends what it counted once per turn over a bounded channel; the replayer reads it
//! (`FeedbackRx::drain`) for a job's auto-pause. A full channel never blocks dispatch: the
//! counts wait for the next flush. Dispatch owns the channel (the replayer depends on dispatch,
//! never the other way); a leaf: imports nothing of the crate.

use std::collections::HashMap;

use tokio::sync::mpsc;

/// Reports sent at most; the sender adds up what it cannot send yet.
const FEEDBACK_QUEUE: usize = 64;

/// How one job's deliveries settled since the last report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// At least one was delivered.
    pub delivered: bool,
    /// Dead letters after the last delivery in this report.
    pub trailing_dead: u32,
}

/// The dispatch side of the feedback channel: counts the settled deliveries of replayed rows
/// per job, and sends what it counted when it `flush`es (once per scheduler turn).
pub struct FeedbackTx {
    tx: mpsc::Sender<Vec<(String, Tally)>>,
    pending: HashMap<String, Tally>,
}

impl FeedbackTx {
    /// A delivery of a row `job` replayed settled: delivered, or dead-lettered (or parked)
    /// again.
    pub fn record(&mut self, job: &str, delivered: bool) {
        let t = self.pending.entry(job.to_string()).or_default();
        if delivered {
            t.delivered = true;
            t.trailing_dead = 0;
        } else {
            t.trailing_dead = t.trailing_dead.saturating_add(1);
        }
    }

    /// Sends what was counted; when the channel is full it stays counted for the next flush.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let report: Vec<(String, Tally)> = self.pending.drain().collect();
        if let Err(mpsc::error::TrySendError::Full(report)) = self.tx.try_send(report) {
            self.pending = report.into_iter().collect();
        }
    }
}

/// The replayer's side of the feedback channel.
pub struct FeedbackRx(mpsc::Receiver<Vec<(String, Tally)>>);

impl FeedbackRx {
    /// Hands every report sent so far to `f`, one job's tally at a time.
    pub fn drain(&mut self, mut f: impl FnMut(&str, Tally)) {
        while let Ok(report) = self.0.try_recv() {
            for (job, t) in report {
                f(&job, t);
            }
        }
    }
}

/// The channel over which dispatch tells the replayer how replayed rows settle.
pub fn feedback() -> (FeedbackTx, FeedbackRx) {
    let (tx, rx) = mpsc::channel(FEEDBACK_QUEUE);
    (
        FeedbackTx {
            tx,
            pending: HashMap::new(),
        },
        FeedbackRx(rx),
    )
}
