"""jetkafka's data-loss error carries the error class Spark's Kafka source gives the same loss."""

from jetspark.datasources.kafka.consumers import DataLossError


def test_the_message_starts_with_sparks_error_class_and_names_the_option():
    gone = DataLossError("orders", 0, 10, 15)
    assert gone.error_class == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
    assert str(gone).startswith("[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] data loss in topic 'orders' "
                                "partition 0: offsets from 10 are needed")
    assert "failOnDataLoss=false" in str(gone)
    past_the_end = DataLossError("orders", 0, 30, "15 (latest 20)", "PARTITION_OFFSET_CHANGED")
    assert str(past_the_end).startswith("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] ")
