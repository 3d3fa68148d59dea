//! Whether anyone listens to cubert's spans, so the hot paths make none when nobody does.
//!
//! cubert's spans go through `tracing`, which forwards them to `log` (its `log` feature)
//! when the program installed no `tracing` subscriber. In that case a span is still
//! built, its fields recorded and its enter and exit logged, each a call that `log`
//! then drops, even where the program set no logger at all. On this repository's
//! development VM that was a fifth of an allocate-and-free pair on the CPU backend
//! (`cargo bench -p cubert-cpu --bench alloc_pair`: 155 ns with no listener before this
//! test, 121 ns after; 129-132 ns under an `INFO` subscriber).
//! [`listened`] is the cheap test the hot paths make first: a subscriber is set (it
//! filters the span itself, cheaply, by its callsite), or a `log` logger takes records
//! of that level. The paths that ask: allocation, launch and execution, and the
//! transfers (`create`'s upload, `read`, `write_tensor`, `to_client`).

/// Whether a span or event at `level` can reach a listener: some `tracing` dispatcher has
/// been set, or `log`'s maximum level admits `level`.
#[inline]
pub(crate) fn listened(level: log::Level) -> bool {
    tracing::dispatcher::has_been_set() || level <= log::max_level()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_subscriber_is_listened_to_at_every_level() {
        let subscriber = tracing::subscriber::NoSubscriber::default();
        tracing::subscriber::with_default(subscriber, || {
            assert!(listened(log::Level::Trace));
        });
    }
}
