//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager): the controllers
//! run only while this replica holds the lease, so two replicas never reconcile at once.

use std::future::Future;
use std::sync::Arc;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::metrics::Metrics;

pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    /// Seconds a lease stays valid after its last renewal.
    pub duration: u64,
    /// Seconds before expiry when the holder renews.
    pub grace: u64,
}

/// Runs `work` whenever this replica leads; stops it (its shutdown future resolves, then it
/// is awaited) when leadership is lost; returns when `stop` resolves.
pub async fn run_when_leader<W, F>(
    client: Client,
    settings: LeaseSettings,
    metrics: Arc<Metrics>,
    work: W,
    stop: impl Future<Output = ()>,
) -> Result<(), kube_lease_manager::LeaseManagerError>
where
    W: Fn(watch::Receiver<bool>) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let manager = LeaseManagerBuilder::new(client, &settings.name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(settings.duration)
        .with_grace(settings.grace)
        .build()
        .await?;
    let (mut leading, task) = manager.watch().await;
    tokio::pin!(stop);
    let mut running: Option<(watch::Sender<bool>, tokio::task::JoinHandle<()>)> = None;
    loop {
        let is_leader = *leading.borrow_and_update();
        metrics.leader.set(is_leader as i64);
        match (is_leader, running.is_some()) {
            (true, false) => {
                tracing::info!(identity = %settings.identity, "acquired the lease; starting controllers");
                let (tx, rx) = watch::channel(false);
                running = Some((tx, tokio::spawn(work(rx))));
            }
            (false, true) => {
                tracing::warn!("lost the lease; stopping controllers");
                if let Some((tx, h)) = running.take() {
                    let _ = tx.send(true);
                    let _ = h.await;
                }
            }
            _ => {}
        }
        tokio::select! {
            r = leading.changed() => if r.is_err() { break },
            _ = &mut stop => break,
        }
    }
    if let Some((tx, h)) = running.take() {
        let _ = tx.send(true);
        let _ = h.await;
    }
    metrics.leader.set(0);
    // Closing the channel makes the manager release the lease and finish.
    drop(leading);
    match task.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "lease manager ended with an error"),
        Err(e) => tracing::warn!(error = %e, "lease manager task failed"),
    }
    Ok(())
}

/// A future resolving when the watch turns true (the stop signal of [`run_when_leader`]).
pub async fn stopped(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}
