//! The durability floor: the no-op server of the ceiling, except that a request answers only
//! after its body is group-committed to a file with `fdatasync` (everything queued meanwhile in
//! one `write` and one sync). No verification, no envelope, no RocksDB: what is left is the
//! cost of "ack after fsync" itself on this machine, which no gateway that keeps that promise
//! can beat.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, mpsc};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::{accepted_reply, serve_gateway_stack};

/// How the floor server makes a batch durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorMode {
    /// A writer thread appends to a growing file, as a write-ahead log does: each `fdatasync`
    /// also writes the file's new size (its inode).
    Append,
    /// A writer thread overwrites a file that was written with zeros and synced first: each
    /// `fdatasync` writes data only (what a recycled WAL would get).
    Preallocated,
    /// Appends like `Append`, but the commit runs on a request's own tokio worker (the first
    /// request to find no commit running commits everything queued, in `block_in_place`), so
    /// no writer thread has to be woken.
    Inline,
}

impl FloorMode {
    /// The bench's child-process role for each mode, and the case name it reports.
    pub const ALL: [(FloorMode, &'static str, &'static str); 3] = [
        (FloorMode::Append, "floor", "fsync_floor"),
        (
            FloorMode::Preallocated,
            "floor-prealloc",
            "fsync_floor_preallocated",
        ),
        (FloorMode::Inline, "floor-inline", "fsync_floor_inline"),
    ];

    pub fn from_role(role: &str) -> Option<FloorMode> {
        Self::ALL
            .iter()
            .find(|(_, r, _)| *r == role)
            .map(|(m, _, _)| *m)
    }
}

/// The file the floor server writes in `dir`: each body as a little-endian `u32` length and the
/// bytes, one after the other (a preallocated file wraps to its start when full).
pub const FLOOR_FILE: &str = "floor.log";

/// Size of the preallocated file; writes wrap around inside it.
const PREALLOCATED_BYTES: u64 = 64 << 20;

type Job = (Bytes, oneshot::Sender<()>);

/// The file and where the next batch goes.
struct Log {
    file: File,
    mode: FloorMode,
    pos: u64,
    buf: Vec<u8>,
}

impl Log {
    fn open(dir: &std::path::Path, mode: FloorMode) -> std::io::Result<Log> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(mode != FloorMode::Preallocated)
            .write(true)
            .open(dir.join(FLOOR_FILE))?;
        if mode == FloorMode::Preallocated {
            let zeros = vec![0u8; 1 << 20];
            for off in (0..PREALLOCATED_BYTES).step_by(zeros.len()) {
                file.write_all_at(&zeros, off)?;
            }
            file.sync_all()?;
        }
        Ok(Log {
            file,
            mode,
            pos: 0,
            buf: Vec::new(),
        })
    }

    /// Writes the batch's bodies (length-prefixed) with one write and one `fdatasync`, then
    /// answers every request of the batch. A failed write answers none (they get a 503).
    fn commit(&mut self, jobs: Vec<Job>) {
        self.buf.clear();
        for (body, _) in &jobs {
            self.buf
                .extend_from_slice(&(body.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(body);
        }
        if self.write().is_ok() {
            for (_, reply) in jobs {
                let _ = reply.send(());
            }
        }
    }

    fn write(&mut self) -> std::io::Result<()> {
        if self.mode == FloorMode::Preallocated {
            if self.pos + self.buf.len() as u64 > PREALLOCATED_BYTES {
                self.pos = 0;
            }
            self.file.write_all_at(&self.buf, self.pos)?;
            self.pos += self.buf.len() as u64;
        } else {
            self.file.write_all(&self.buf)?;
        }
        self.file.sync_data()
    }
}

/// Requests queued for an inline commit, and whether a leader is committing.
#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    committing: bool,
}

/// Where a request hands its body.
#[derive(Clone)]
enum Committer {
    /// To the writer thread.
    Thread(mpsc::Sender<Job>),
    /// To the queue an inline leader drains.
    Inline(Arc<Mutex<Pending>>, Arc<Mutex<Log>>),
}

impl Committer {
    fn start(mut log: Log) -> Committer {
        if log.mode == FloorMode::Inline {
            return Committer::Inline(Arc::default(), Arc::new(Mutex::new(log)));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut jobs = vec![first];
                jobs.extend(rx.try_iter());
                log.commit(jobs);
            }
        });
        Committer::Thread(tx)
    }

    /// Queues the job; false if it cannot be committed (the writer is gone).
    fn queue(&self, job: Job) -> bool {
        match self {
            Committer::Thread(tx) => tx.send(job).is_ok(),
            Committer::Inline(pending, log) => {
                let leader = {
                    let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                    p.jobs.push(job);
                    !std::mem::replace(&mut p.committing, true)
                };
                if leader {
                    commit_inline(pending, log);
                }
                true
            }
        }
    }
}

/// Runs the floor server, writing `dir/floor.log`. Blocks; meant for a child process.
pub fn run_fsync_floor_server(
    addr: SocketAddr,
    mode: FloorMode,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let committer = Committer::start(Log::open(dir, mode)?);
    let app = axum::Router::new().fallback(move |body: Bytes| {
        let committer = committer.clone();
        async move {
            let (reply, done) = oneshot::channel();
            let durable = committer.queue((body, reply)) && done.await.is_ok();
            accepted_reply(if durable {
                axum::http::StatusCode::CREATED
            } else {
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            })
        }
    });
    serve_gateway_stack(addr, app)
}

/// The inline leader: commits what is queued until the queue is empty, then gives the role up
/// under the lock new requests queue under, so no request is left waiting without a leader.
fn commit_inline(pending: &Mutex<Pending>, log: &Mutex<Log>) {
    loop {
        let jobs = {
            let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.jobs.is_empty() {
                p.committing = false;
                return;
            }
            std::mem::take(&mut p.jobs)
        };
        tokio::task::block_in_place(|| {
            log.lock().unwrap_or_else(|e| e.into_inner()).commit(jobs);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MakeRequest, closed_loop, free_port, signed_request};
    use std::time::Duration;

    /// The length-prefixed bodies at the start of a floor file, up to the first empty slot.
    fn bodies(file: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + 4 <= file.len() {
            let len = u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
            if len == 0 || at + 4 + len > file.len() {
                break;
            }
            out.push(&file[at + 4..at + 4 + len]);
            at += 4 + len;
        }
        out
    }

    #[test]
    fn every_mode_answers_only_what_it_wrote() {
        for (mode, role, _) in FloorMode::ALL {
            let dir = tempfile::tempdir().unwrap();
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || run_fsync_floor_server(addr, mode, &path));
            let rt = tokio::runtime::Runtime::new().unwrap();
            let make: MakeRequest = Arc::new(|n| signed_request("/x", b"key", n));
            let load = rt.block_on(async {
                while tokio::net::TcpStream::connect(addr).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                closed_loop(
                    addr,
                    8,
                    Duration::ZERO,
                    Duration::from_millis(300),
                    None,
                    make,
                )
                .await
                .unwrap()
            });
            assert!(load.ok > 0, "{role}: nothing answered");
            assert_eq!((load.refused, load.errors), (0, 0), "{role}");
            let file = std::fs::read(dir.path().join(FLOOR_FILE)).unwrap();
            let written = bodies(&file);
            // Requests still in flight when the load stopped may be written but unanswered.
            assert!(
                written.len() as u64 >= load.ok,
                "{role}: {} answered, {} written",
                load.ok,
                written.len()
            );
            assert!(written.iter().all(|b| b.len() == 1024), "{role}");
        }
    }
}
