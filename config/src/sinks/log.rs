//! The log sink: records each delivery in the gateway's log.

sink_config! {
    #[derive(Default)]
    pub struct LogSinkConfig {}
}
