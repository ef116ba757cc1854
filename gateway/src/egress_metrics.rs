//! `ankusa_sink_egress_refused_total{sink, class}`: connections a broker client was about to
//! open to an address the egress policy refuses, counted where the refusal happens (the Kafka
//! connect guard in `ankusa_sinks`, process-wide) and read at every scrape. A collector rather
//! than a counter the sinks increment: the guard runs inside librdkafka's connect callback,
//! which holds no handle to the gateway's registry.

use std::sync::Mutex;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts};

pub struct EgressRefused {
    counts: Mutex<IntCounterVec>,
    desc: Vec<Desc>,
}

impl EgressRefused {
    pub fn new() -> EgressRefused {
        let vec = IntCounterVec::new(
            Opts::new(
                "ankusa_sink_egress_refused_total",
                "Broker connections refused by the egress policy (address resolved or advertised)",
            ),
            &["sink", "class"],
        )
        .expect("a valid metric definition");
        let desc = vec.desc().into_iter().cloned().collect();
        EgressRefused {
            counts: Mutex::new(vec),
            desc,
        }
    }
}

impl Collector for EgressRefused {
    fn desc(&self) -> Vec<&Desc> {
        self.desc.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let vec = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        for (class, n) in ankusa_sinks::kafka::refused_connects() {
            let c = vec.with_label_values(&["kafka", class]);
            // The source is monotonic; the copy follows it exactly (reset + add under the lock).
            c.reset();
            c.inc_by(n);
        }
        vec.collect()
    }
}
