//! What a Kafka error means: for a produced entry, definitely not stored or unknown; for a
//! client, whether its brokers are away (which says nothing about any entry).
//!
//! librdkafka knows per message whether it was possibly persisted, but rust-rdkafka's safe API
//! does not expose that status. So only errors that provably happen before the record reaches a
//! broker's log, or that are the broker's explicit refusal, count as "not stored"; everything
//! else (above all a delivery timeout while the record may be in flight) is "unknown". Wrongly
//! saying FALSE could lose a write; wrongly saying UNKNOWN only costs an idempotent retry.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::Durability;

pub(crate) fn durability_of(error: &KafkaError) -> Durability {
    match error.rdkafka_error_code() {
        Some(code) if refused_before_append(code) => Durability::NotStored,
        _ => Durability::Unknown,
    }
}

/// Whether an error says the client cannot reach its brokers, or a broker cannot serve it for
/// now (a coordinator or leader moving): librdkafka reconnects and retries by itself, so the
/// error is the service's absence to count, not a failure of the operation that saw it.
pub fn broker_away(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::AllBrokersDown
            | C::BrokerTransportFailure
            | C::Resolve
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::WaitingForCoordinator
            | C::RequestTimedOut
            | C::NetworkException
            | C::BrokerNotAvailable
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::CoordinatorLoadInProgress
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
    )
}

fn refused_before_append(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        // librdkafka refused the record locally. Not a record purged from its queue
        // (PurgeQueue: a producer closed, or failed for good): a retry waits in that queue
        // after its first send, which the broker may have stored.
        C::QueueFull
            | C::InvalidArgument
            | C::BadMessage
            | C::UnknownTopic
            | C::UnknownPartition
            // The broker rejected the produce request without appending.
            | C::MessageSizeTooLarge
            | C::InvalidMessageSize
            | C::InvalidMessage
            | C::InvalidRecord
            | C::InvalidTopic
            | C::UnknownTopicOrPartition
            | C::TopicAuthorizationFailed
            | C::NotEnoughReplicas
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The durability a produce that failed with `code` is answered with.
    fn produced(code: RDKafkaErrorCode) -> Durability {
        durability_of(&KafkaError::MessageProduction(code))
    }

    #[test]
    fn a_timeout_in_flight_is_unknown() {
        assert_eq!(
            produced(RDKafkaErrorCode::MessageTimedOut),
            Durability::Unknown
        );
        let after_append = RDKafkaErrorCode::NotEnoughReplicasAfterAppend;
        assert_eq!(produced(after_append), Durability::Unknown);
        // Purged from librdkafka's queue: it may hold a retry of a record already sent.
        assert_eq!(produced(RDKafkaErrorCode::PurgeQueue), Durability::Unknown);
    }

    #[test]
    fn a_broker_away_is_told_apart_from_a_mistake() {
        assert!(broker_away(RDKafkaErrorCode::AllBrokersDown));
        assert!(broker_away(RDKafkaErrorCode::BrokerTransportFailure));
        assert!(broker_away(RDKafkaErrorCode::NotCoordinator));
        // These fail the same way until someone acts: the worker backs off and says so.
        assert!(!broker_away(RDKafkaErrorCode::UnknownTopicOrPartition));
        assert!(!broker_away(RDKafkaErrorCode::TopicAuthorizationFailed));
        assert!(!broker_away(RDKafkaErrorCode::GroupAuthorizationFailed));
        assert!(!broker_away(RDKafkaErrorCode::Authentication));
    }

    #[test]
    fn a_refusal_before_append_is_not_stored() {
        for code in [
            RDKafkaErrorCode::QueueFull,
            RDKafkaErrorCode::MessageSizeTooLarge,
        ] {
            assert_eq!(produced(code), Durability::NotStored, "{code:?}");
        }
    }
}
