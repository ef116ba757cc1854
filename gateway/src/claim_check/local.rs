//! Claims as files: `<dir>/<tenant>/<claim_id>` under the node's data dir (or a `store` of type
//! `local`, a directory the fleet's pods may share). A write is a temp file, fsync, rename,
//! then a directory fsync, so a claim that a delivered message names survives power loss.
//! Claims outlive their hook (a consumer redeems after the delivery); the sweeper
//! (`claim_check.retention_days`) bounds how long. Imports the leaves `claim_ref` and `range`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use ankusa_core::{ClaimCheckRef, Envelope};
use axum::response::Response;

use super::claim_ref::{claim_id, reference, valid};
use super::range::serve;

pub struct LocalClaims {
    dir: PathBuf,
}

impl LocalClaims {
    pub fn new(dir: PathBuf) -> std::io::Result<LocalClaims> {
        ankusa_store::create_dir_synced(&dir)?;
        Ok(LocalClaims { dir })
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn path(&self, tenant: &str, claim_id: &str) -> Option<PathBuf> {
        valid(tenant, claim_id).then(|| self.dir.join(tenant).join(claim_id))
    }

    /// Writes `env`'s body once (a claim of the body's length is already there).
    pub fn write(&self, env: &Envelope) -> std::io::Result<ClaimCheckRef> {
        let id = claim_id(env);
        let path = self.path(&env.tenant, &id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad tenant or claim id")
        })?;
        let reference = reference(env);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == env.body.len() as u64) {
            return Ok(reference);
        }
        let dir = path.parent().expect("claim path has a tenant directory");
        ankusa_store::create_dir_synced(dir)?;
        // Two sinks may check in the same hook at once: each writes its own temp file (the
        // process id alone would be shared), and `create_new` never truncates another's.
        static WRITER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let writer = WRITER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{id}.tmp-{}-{writer}", std::process::id()));
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(&env.body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(reference)
    }

    /// Deletes claims older than `days`; returns how many.
    pub fn sweep(&self, days: u32) -> std::io::Result<usize> {
        let cutoff = SystemTime::now() - Duration::from_secs(u64::from(days) * 86_400);
        let mut n = 0;
        for tenant in std::fs::read_dir(&self.dir)? {
            let tenant = tenant?;
            if !tenant.file_type()?.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(tenant.path())? {
                let f = f?;
                if f.metadata()?.modified()? < cutoff {
                    std::fs::remove_file(f.path())?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    /// The claim port's answer for one claim (blocking IO). `NotFound`: no such claim.
    pub fn read(
        &self,
        tenant: &str,
        claim_id: &str,
        range: Option<&str>,
        head: bool,
    ) -> std::io::Result<Response> {
        let path = self
            .path(tenant, claim_id)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        serve(len, range, head, |start, n| {
            f.seek(SeekFrom::Start(start))?;
            let mut body = Vec::with_capacity(n as usize);
            f.take(n).read_to_end(&mut body)?;
            Ok(body)
        })
    }
}
