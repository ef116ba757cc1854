{{/*
The alert rules of Ankusa gateways and the Ankusa operator: the ONE source of them.

  templates/monitoring/prometheusrule.yaml renders them as a PrometheusRule when
  `monitoring.rules.enabled`; deploy/monitoring/render.sh renders them with the default values
  into deploy/monitoring/ankusa-rules.yaml (a plain rules file for a Prometheus without the
  Prometheus Operator), and deploy/monitoring/check.sh fails when that file differs from a
  fresh render. Edit the rules here, then run deploy/monitoring/render.sh.

Thresholds come from `monitoring.rules.thresholds` (values.yaml documents each default;
docs/operations.md lists them). Prometheus's own `{{ ... }}` templates of the annotations are
escaped as {{`{{ ... }}`}}.
*/}}
{{- define "ankusa.monitoring.ruleGroups" -}}
{{- $t := .Values.monitoring.rules.thresholds -}}
{{- $runbooks := .Values.monitoring.rules.runbookBaseUrl | trimSuffix "/" -}}
groups:
  # ---------------------------------------------------------------------------------------
  # Ack SLO: the providers' view. docs/runbooks/ack-slo.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-ack-slo
    rules:
      # p99 of the time from request to answer above 50 ms for 10 minutes. The benchmark
      # target is a p99 under 10 ms (docs/benchmarks.md); 50 ms leaves room for slower
      # production disks. The histogram has no status label, so this is the p99 of every
      # answer (fast 4xx refusals included), not of the 201s alone.
      - alert: AnkusaAckLatencyHigh
        expr: |
          histogram_quantile(0.99, rate(ankusa_ingest_duration_seconds_bucket[5m])) > {{ $t.ackLatencyP99Seconds }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa ingest p99 latency above {{ mulf $t.ackLatencyP99Seconds 1000 }} ms"
          description: "The p99 time from request to answer on {{`{{ $labels.instance }}`}} is {{`{{ $value | humanizeDuration }}`}} (threshold {{ mulf $t.ackLatencyP99Seconds 1000 }} ms) for 10 minutes. Every 201 waits for a synced group commit: look at the fsync time and the commit queue."
          runbook_url: {{ $runbooks }}/ack-slo.md
      # More than 1% of ingest requests answered 503 (overload, store_unavailable, dlq_full,
      # quarantine_full, intake_unavailable, intake_pending) over 5 minutes, for 10 minutes.
      # Providers retry a 503, so nothing is lost yet, but the ack SLO is broken.
      - alert: AnkusaAck503ShareHigh
        expr: |
          sum without (outcome) (rate(ankusa_ingest_requests_total{outcome=~"overload|store_unavailable|dlq_full|quarantine_full|intake_unavailable|intake_pending"}[5m]))
            /
          sum without (outcome) (rate(ankusa_ingest_requests_total[5m]))
            > {{ $t.ack503ShareWarning }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa answers more than {{ mulf $t.ack503ShareWarning 100 }}% of ingest requests 503"
          description: "{{`{{ $value | humanizePercentage }}`}} of ingest requests on {{`{{ $labels.instance }}`}} were answered 503 over the last 5 minutes (threshold {{ mulf $t.ack503ShareWarning 100 }}%)."
          runbook_url: {{ $runbooks }}/ack-slo.md
      # More than 10% answered 503 for 5 minutes: providers see a failing endpoint and some
      # (those that give up after a few retries) will drop hooks.
      - alert: AnkusaAck503ShareCritical
        expr: |
          sum without (outcome) (rate(ankusa_ingest_requests_total{outcome=~"overload|store_unavailable|dlq_full|quarantine_full|intake_unavailable|intake_pending"}[5m]))
            /
          sum without (outcome) (rate(ankusa_ingest_requests_total[5m]))
            > {{ $t.ack503ShareCritical }}
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "Ankusa answers more than {{ mulf $t.ack503ShareCritical 100 }}% of ingest requests 503"
          description: "{{`{{ $value | humanizePercentage }}`}} of ingest requests on {{`{{ $labels.instance }}`}} were answered 503 over the last 5 minutes (threshold {{ mulf $t.ack503ShareCritical 100 }}%)."
          runbook_url: {{ $runbooks }}/ack-slo.md

  # ---------------------------------------------------------------------------------------
  # Ingest capacity. docs/runbooks/ingest-capacity.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-ingest-capacity
    rules:
      # Records waiting for or in a group commit above 8 000 for 5 minutes. `batcher.max_queue`
      # defaults to 10 000 per partition (2 partitions); the gauge sums the partitions and one
      # hot partition (ordered sinks, one dedupe key) can fill alone, so 80% of one
      # partition's cap is the warning point. Past the cap ingest answers 503 overload.
      - alert: AnkusaIngestQueueNearCapacity
        expr: |
          ankusa_batcher_queued > {{ int64 $t.ingestQueuedRecords }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa commit queue near its capacity"
          description: "{{`{{ $value }}`}} records wait for a group commit on {{`{{ $labels.instance }}`}} (batcher.max_queue defaults to 10000 per partition); at the cap new hooks get 503 overload."
          runbook_url: {{ $runbooks }}/ingest-capacity.md
      # Open ingest connections above 8 000 for 5 minutes: 80% of
      # `http.connections.max_connections` (default 10 000); past it a new connection is
      # answered 503 and closed.
      - alert: AnkusaIngestConnectionsNearCapacity
        expr: |
          ankusa_http_connections{listener="ingest"} > {{ int64 $t.ingestConnections }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa ingest connections near max_connections"
          description: "{{`{{ $value }}`}} ingest connections are open on {{`{{ $labels.instance }}`}} (http.connections.max_connections defaults to 10000)."
          runbook_url: {{ $runbooks }}/ingest-capacity.md
      # Any connection refused at `max_connections` for 5 minutes. These 503s are answered
      # before a request is read, so they are not in ankusa_ingest_requests_total (and not in
      # the 503 share above).
      - alert: AnkusaIngestConnectionsRefused
        expr: |
          rate(ankusa_http_connections_refused_total{listener="ingest"}[5m]) > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa refuses ingest connections at max_connections"
          description: "{{`{{ $labels.instance }}`}} refuses {{`{{ $value | printf \"%.2f\" }}`}} ingest connections per second with 503 at http.connections.max_connections."
          runbook_url: {{ $runbooks }}/ingest-capacity.md

  # ---------------------------------------------------------------------------------------
  # Delivery: backlog, latency, breakers. docs/runbooks/backlog.md, delivery-latency.md,
  # circuit-breakers.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-delivery
    rules:
      # The oldest due delivery row is more than 5 minutes late, for 10 minutes. Retries are
      # at most 5 minutes apart by default (`dispatch.retry.max_ms` 300 000), so a row due
      # for longer than that is waiting for dispatch, not for its backoff.
      - alert: AnkusaBacklogStale
        expr: |
          ankusa_queue_oldest_due_age_seconds > {{ $t.backlogOldestDueSeconds }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa delivery backlog is stale"
          description: "The oldest due delivery row on {{`{{ $labels.instance }}`}} is {{`{{ $value | humanizeDuration }}`}} late (threshold {{ $t.backlogOldestDueSeconds }}s): dispatch does not keep up."
          runbook_url: {{ $runbooks }}/backlog.md
      # p99 duration of successful delivery attempts above 5 s for 15 minutes, per sink type.
      # Attempts are cut at `dispatch.attempt_timeout_ms` (30 s); a sink that takes 5 s to
      # accept holds its dispatch slots six times as long as one that answers in under 1 s.
      - alert: AnkusaDeliveryLatencyHigh
        expr: |
          histogram_quantile(0.99, sum without (result) (rate(ankusa_dispatch_attempt_duration_seconds_bucket{result="ok"}[10m]))) > {{ $t.deliveryLatencyP99Seconds }}
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa delivery latency to {{`{{ $labels.sink }}`}} sinks is high"
          description: "The p99 duration of successful delivery attempts to {{`{{ $labels.sink }}`}} sinks on {{`{{ $labels.instance }}`}} is {{`{{ $value | humanizeDuration }}`}} (threshold {{ $t.deliveryLatencyP99Seconds }}s)."
          runbook_url: {{ $runbooks }}/delivery-latency.md
      # A circuit breaker has been open in every 5-minute window for 15 minutes (the breaker
      # reopens for up to `dispatch.breaker_max_open_ms`, 5 minutes, between probes; the
      # 5-minute max_over_time bridges the probe moments when it is half-open).
      - alert: AnkusaCircuitBreakerOpenLong
        expr: |
          max_over_time(ankusa_dispatch_breakers_open[5m]) > 0
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa circuit breakers open for more than 15 minutes"
          description: "{{`{{ $value }}`}} circuit breaker(s) on {{`{{ $labels.instance }}`}} have stayed open for 15 minutes: their sinks' deliveries are parked and age toward the retry horizon."
          runbook_url: {{ $runbooks }}/circuit-breakers.md

  # ---------------------------------------------------------------------------------------
  # DLQ. docs/runbooks/dlq.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-dlq
    rules:
      # The DLQ gained rows over the last 15 minutes, and kept gaining for 5 minutes. Any
      # dead row is a hook a sink did not get; a steady stream of them is a broken sink.
      - alert: AnkusaDlqGrowing
        expr: |
          delta(ankusa_dlq_rows[15m]) > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa dead-letter queue is growing"
          description: "The DLQ on {{`{{ $labels.instance }}`}} gained about {{`{{ $value | humanize }}`}} rows in the last 15 minutes."
          runbook_url: {{ $runbooks }}/dlq.md
      # The DLQ is over a `queue.dlq` bound with nothing archived to evict: new hooks are
      # answered 503 dlq_full. Fires after 1 minute.
      - alert: AnkusaDlqFull
        expr: |
          ankusa_dlq_full == 1
        for: 1m
        labels:
          severity: critical
        annotations:
          summary: "Ankusa DLQ is full: new hooks are refused"
          description: "The DLQ on {{`{{ $labels.instance }}`}} is over a queue.dlq bound with nothing archived left to evict; new hooks get 503 dlq_full."
          runbook_url: {{ $runbooks }}/dlq.md

  # ---------------------------------------------------------------------------------------
  # Store. docs/runbooks/store.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-store
    rules:
      # Any failed store write in the last 5 minutes, by class (no_space, read_only,
      # corruption, busy, io_error, other). A failed synced write is a 503 to providers and
      # an unready pod. The second half catches the first failure of a class: the labelled
      # series appears at 1 and `increase` needs two samples.
      - alert: AnkusaStoreWriteFailures
        expr: |
          increase(ankusa_store_write_failures_total[5m]) > 0
            or
          (ankusa_store_write_failures_total unless ankusa_store_write_failures_total offset 5m)
        labels:
          severity: critical
        annotations:
          summary: "Ankusa store writes fail ({{`{{ $labels.class }}`}})"
          description: "Store writes of class {{`{{ $labels.class }}`}} failed on {{`{{ $labels.instance }}`}} in the last 5 minutes: ingest answers 503 store_unavailable and /ready fails."
          runbook_url: {{ $runbooks }}/store.md
      # Any row set aside as corrupt in the last 30 minutes. The counter counts since the
      # store was made (it survives restarts). A delivery row set aside is a delivery the
      # gateway can no longer make as stored.
      - alert: AnkusaStoreCorruptRows
        expr: |
          increase(ankusa_store_corrupt_rows_total[30m]) > 0
        labels:
          severity: critical
        annotations:
          summary: "Ankusa store rows did not decode"
          description: "{{`{{ $value | humanize }}`}} store rows on {{`{{ $labels.instance }}`}} did not decode in the last 30 minutes and were moved to the corrupt index."
          runbook_url: {{ $runbooks }}/store.md

  # ---------------------------------------------------------------------------------------
  # The node: its store's volume and its readiness. docs/runbooks/disk.md, readiness.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-node
    rules:
      # Less than 10% of the store's volume free, for 5 minutes. RocksDB needs room to
      # compact; on a full volume every synced write fails (`AnkusaStoreWriteFailures`, class
      # `no_space`) and ingest answers 503 store_unavailable.
      - alert: AnkusaStoreVolumeNearlyFull
        expr: |
          ankusa_store_volume_free_bytes / ankusa_store_volume_size_bytes < {{ $t.volumeFreeRatio }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa store volume nearly full"
          description: "Only {{`{{ $value | humanizePercentage }}`}} of the store's volume on {{`{{ $labels.instance }}`}} is free (threshold {{ mulf $t.volumeFreeRatio 100 }}%)."
          runbook_url: {{ $runbooks }}/disk.md
      # At the rate of the last hour the volume fills within 4 hours, for 15 minutes (and is
      # already past half full, so a young volume's first burst does not page).
      - alert: AnkusaStoreVolumeFillingUp
        expr: |
          predict_linear(ankusa_store_volume_free_bytes[1h], {{ int64 $t.volumeFullWithinSeconds }}) < 0
            and
          ankusa_store_volume_free_bytes / ankusa_store_volume_size_bytes < 0.5
        for: 15m
        labels:
          severity: critical
        annotations:
          summary: "Ankusa store volume fills up within {{ int64 $t.volumeFullWithinSeconds }}s"
          description: "At the rate of the last hour the store's volume on {{`{{ $labels.instance }}`}} is full within {{ int64 $t.volumeFullWithinSeconds }}s; then every hook is answered 503 store_unavailable."
          runbook_url: {{ $runbooks }}/disk.md
      # `/ready` would answer 503 (a listener not bound, the store not writable, the intake
      # log down) for 5 minutes: Kubernetes sends the pod no hooks, and with every pod
      # unready providers get connection errors. Only a PodMonitor (or a scrape of every pod)
      # sees an unready pod: a Service's endpoints drop it.
      - alert: AnkusaNodeNotReady
        expr: |
          ankusa_ready == 0
        for: {{ $t.nodeNotReadyFor }}
        labels:
          severity: critical
        annotations:
          summary: "Ankusa gateway pod not ready"
          description: "{{`{{ $labels.instance }}`}} has answered /ready with 503 for {{ $t.nodeNotReadyFor }}: it takes no hooks. GET /ready names the cause."
          runbook_url: {{ $runbooks }}/readiness.md

  # ---------------------------------------------------------------------------------------
  # Durability: backup and intake log. docs/runbooks/backup.md, intake.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-durability
    rules:
      # No complete backup for more than 180 s, for 5 minutes: 3 x `backup.interval_ms`
      # (60 000 by default), the operator's own `BackupStale` point. With backups off the
      # gauge reads 0.
      - alert: AnkusaBackupStale
        expr: |
          ankusa_backup_age_seconds > {{ $t.backupAgeSeconds }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa store backup is stale"
          description: "The last complete backup of {{`{{ $labels.instance }}`}} is {{`{{ $value | humanizeDuration }}`}} old (threshold {{ $t.backupAgeSeconds }}s): a lost volume would lose the hooks acked since."
          runbook_url: {{ $runbooks }}/backup.md
      # The intake log (`wal.type: dual`) takes no records for 3 minutes: recovering or its
      # breaker open. Every new hook is answered 503 intake_unavailable. The series exists
      # only with an intake log.
      - alert: AnkusaIntakeDown
        expr: |
          ankusa_intake_ready == 0
        for: 3m
        labels:
          severity: critical
        annotations:
          summary: "Ankusa intake log is down: new hooks are refused"
          description: "The intake log of {{`{{ $labels.instance }}`}} has not taken records for 3 minutes (recovering or breaker open); new hooks get 503 intake_unavailable."
          runbook_url: {{ $runbooks }}/intake.md
      # Hooks wait for the intake log's confirmation and the last confirmation is more than
      # 30 s old, for 5 minutes (`intake.publish_timeout_ms` is 5 s; a healthy log confirms
      # within it).
      - alert: AnkusaIntakeLagHigh
        expr: |
          ankusa_intake_offset_lag_seconds > {{ $t.intakeLagSeconds }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa intake log confirmations lag"
          description: "Hooks on {{`{{ $labels.instance }}`}} have waited {{`{{ $value | humanizeDuration }}`}} since the intake log's last confirmation (threshold {{ $t.intakeLagSeconds }}s)."
          runbook_url: {{ $runbooks }}/intake.md
      # Hooks committed here whose intake record is still unconfirmed after 60 s, for 5
      # minutes: the reconciler (every `intake.reconcile_interval_ms`, 1 s) cannot publish
      # them. Until confirmed they exist only on this pod's volume.
      - alert: AnkusaIntakeReconcileStuck
        expr: |
          ankusa_intake_reconcile_stuck > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa hooks are not confirmed by the intake log"
          description: "{{`{{ $value }}`}} hooks on {{`{{ $labels.instance }}`}} have waited more than 60s for the intake log's confirmation."
          runbook_url: {{ $runbooks }}/intake.md

  # ---------------------------------------------------------------------------------------
  # Quarantine pen and archive. docs/runbooks/quarantine.md, archive.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-quarantine-archive
    rules:
      # The pen holds more than 80% of `quarantine.max_bytes` (1 GiB by default, per pod)
      # for 10 minutes; the operator's `QuarantineNearFull` condition uses the same 80%.
      - alert: AnkusaQuarantineNearFull
        expr: |
          ankusa_quarantine_bytes > {{ $t.quarantineNearFullRatio }} * {{ int64 $t.quarantineMaxBytes }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa quarantine pen near full"
          description: "The quarantine pen of {{`{{ $labels.instance }}`}} holds {{`{{ $value | humanize1024 }}`}}B (threshold {{ mulf $t.quarantineNearFullRatio 100 }}% of quarantine.max_bytes, {{ int64 $t.quarantineMaxBytes }} bytes); at the cap hooks that fail verification get 503 quarantine_full."
          runbook_url: {{ $runbooks }}/quarantine.md
      # Hooks refused 503 quarantine_full in the last 10 minutes, by the cap that refused
      # them (node, source, tenant). The second half catches the first refusal of a scope.
      - alert: AnkusaQuarantineFull
        expr: |
          increase(ankusa_quarantine_full_total[10m]) > 0
            or
          (ankusa_quarantine_full_total unless ankusa_quarantine_full_total offset 10m)
        labels:
          severity: warning
        annotations:
          summary: "Ankusa quarantine pen refuses hooks ({{`{{ $labels.scope }}`}} cap)"
          description: "{{`{{ $labels.instance }}`}} answered hooks that failed verification 503 quarantine_full at its {{`{{ $labels.scope }}`}} cap in the last 10 minutes."
          runbook_url: {{ $runbooks }}/quarantine.md
      # The oldest hook waiting for the archive is more than 10 minutes old, for 10 minutes.
      # A segment is cut after `storage.roll_ms` (30 s) and a failing upload backs off at
      # most 60 s, so a keeping-up archive stays far below.
      - alert: AnkusaArchiveBehind
        expr: |
          ankusa_archive_oldest_unarchived_age_seconds > {{ $t.archiveOldestUnarchivedSeconds }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa archive is behind"
          description: "The oldest hook waiting for the archive on {{`{{ $labels.instance }}`}} is {{`{{ $value | humanizeDuration }}`}} old (threshold {{ $t.archiveOldestUnarchivedSeconds }}s)."
          runbook_url: {{ $runbooks }}/archive.md
      # Three or more failed segment uploads or catalogue commits in 15 minutes: the
      # operator reports `ArchiveFailing` after 3 failures in a row.
      - alert: AnkusaArchiveUploadsFailing
        expr: |
          increase(ankusa_archive_failures_total[15m]) >= {{ int64 $t.archiveFailures }}
        labels:
          severity: warning
        annotations:
          summary: "Ankusa archive uploads fail"
          description: "{{`{{ $value | humanize }}`}} archive uploads or catalogue commits failed on {{`{{ $labels.instance }}`}} in the last 15 minutes."
          runbook_url: {{ $runbooks }}/archive.md

  # ---------------------------------------------------------------------------------------
  # The operator. docs/runbooks/operator.md
  # ---------------------------------------------------------------------------------------
  - name: ankusa-operator
    rules:
      # Reconciles failing (other than `waiting`, which is an expected requeue) in every
      # 10-minute window for 15 minutes, per controller and error class (kube, finalizer,
      # invalid).
      - alert: AnkusaOperatorReconcileErrors
        expr: |
          sum by (namespace, job, controller, error) (increase(ankusa_operator_reconcile_errors_total{error!="waiting"}[10m])) > 0
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa operator reconciles of {{`{{ $labels.controller }}`}} fail ({{`{{ $labels.error }}`}})"
          description: "{{`{{ $value | humanize }}`}} reconciles of the {{`{{ $labels.controller }}`}} controller failed with {{`{{ $labels.error }}`}} errors in the last 10 minutes, for 15 minutes."
          runbook_url: {{ $runbooks }}/operator.md
      # No operator replica holds the leader lease for 5 minutes (a new leader takes over
      # within the 15 s lease duration): nothing reconciles.
      - alert: AnkusaOperatorNoLeader
        expr: |
          max by (namespace, job) (ankusa_operator_leader) < 1
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "No Ankusa operator replica is leader"
          description: "No replica of {{`{{ $labels.job }}`}} in {{`{{ $labels.namespace }}`}} has held the leader lease for 5 minutes: no Gateway, Source, Sink or ReplayJob is reconciled."
          runbook_url: {{ $runbooks }}/operator.md
      # Calls from the operator to gateway pods' admin API failing, in every 10-minute window
      # for 15 minutes: a pod the operator cannot push config to or read status from.
      - alert: AnkusaOperatorPodCallsFailing
        expr: |
          sum by (namespace, job, op) (increase(ankusa_operator_pod_calls_total{result="error"}[10m])) > 0
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: "Ankusa operator cannot reach gateway pods ({{`{{ $labels.op }}`}})"
          description: "{{`{{ $value | humanize }}`}} {{`{{ $labels.op }}`}} calls from the operator to gateway pods failed in the last 10 minutes, for 15 minutes."
          runbook_url: {{ $runbooks }}/operator.md

      # The admin CA of a Gateway ends within 30 days. The operator renews the CA a year
      # before it ends, so a CA this close to its end is one the operator failed to renew;
      # when it ends, the operator can no longer reach the pods' admin API (config pushes,
      # status, replays) and scrapes over TLS fail.
      - alert: AnkusaAdminCaExpiresSoon
        expr: |
          ankusa_operator_admin_ca_expiry_timestamp_seconds - time() < {{ int64 $t.adminCaExpiryWarningDays }} * 86400
        for: 1h
        labels:
          severity: warning
        annotations:
          summary: "Ankusa admin CA of Gateway {{`{{ $labels.gateway }}`}} ends within {{ int64 $t.adminCaExpiryWarningDays }} days"
          description: "The admin CA of Gateway {{`{{ $labels.gateway }}`}} ends in {{`{{ $value | humanizeDuration }}`}} (threshold {{ int64 $t.adminCaExpiryWarningDays }} days); the operator renews it a year ahead, so renewal is failing."
          runbook_url: {{ $runbooks }}/certificates.md
      # Within 7 days: page.
      - alert: AnkusaAdminCaExpiryCritical
        expr: |
          ankusa_operator_admin_ca_expiry_timestamp_seconds - time() < {{ int64 $t.adminCaExpiryCriticalDays }} * 86400
        for: 10m
        labels:
          severity: critical
        annotations:
          summary: "Ankusa admin CA of Gateway {{`{{ $labels.gateway }}`}} ends within {{ int64 $t.adminCaExpiryCriticalDays }} days"
          description: "The admin CA of Gateway {{`{{ $labels.gateway }}`}} ends in {{`{{ $value | humanizeDuration }}`}} (threshold {{ int64 $t.adminCaExpiryCriticalDays }} days); when it ends the operator cannot reach the gateway pods."
          runbook_url: {{ $runbooks }}/certificates.md
{{- end -}}
