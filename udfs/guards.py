"""The function set's signatures, and the message a guard gives when a function reaches an engine un-rewritten."""
from __future__ import annotations

#: name -> the argument lists it accepts (the rewrite gives these their meaning).
SIGNATURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "is_not_dup": (("producer", "sequence_id"), ("producer", "sequence_id", "highest_sequence_id")),
    "dup_status": (("topic", "producer", "sequence_id"), ("topic", "producer", "sequence_id", "highest_sequence_id")),
    "last_sequence_id": (("topic", "producer"),),
    "is_new": (("key",), ("key", "key2"), ("key", "key2", "key3")),      # (R20, sql/key_window.py)
}


def guard_message(name: str) -> str:
    """Why an un-rewritten call fails, and how to run it instead."""
    return (
        f"{name}() must be rewritten by seqdedup before it runs, or it would silently give weaker semantics "
        "(no in-statement duplicates, no recovered state). Run the statement through seqdedup: "
        "seqdedup.connect(...).sql(statement) in Python (seqdedup.connect(spark) for a SparkSession), a %%seqdedup "
        "cell in a notebook (after %load_ext seqdedup), or `seqdedup sql \"...\"` on the command line"
    )


def kafka_producer_name(producer_id: int, producer_epoch: int) -> str:
    """R15: the producer name of a Kafka idempotent producer, as StreamNative KoP spells it.

    Example:
        >>> kafka_producer_name(7, 0)
        'KOP-PID-PREFIX-7-0'
    """
    return f"KOP-PID-PREFIX-{producer_id}-{producer_epoch}"


def check_probe(producer: object, sequence_id: object, highest_sequence_id: object = None) -> None:
    """The arguments of a ``dup_status`` asked from Python: a producer name and ids as R4 wants them, else an
    ``InvalidEntryError`` saying what is wrong (an id ``'5'``, ``True`` or ``2.5`` is no id).

    Example:
        >>> check_probe("p", True)
        Traceback (most recent call last):
        seqdedup.errors.InvalidEntryError: dup_status: sequence_id True is not an integer; sequence ids are BIGINT
    """
    from seqdedup.errors import InvalidEntryError

    from .reference import Entry, _problem

    if producer is not None and not isinstance(producer, str):
        raise InvalidEntryError(f"dup_status: the producer {producer!r} is not a string; producer names are strings")
    problem = _problem(Entry(producer, sequence_id, highest_sequence_id))   # type: ignore[arg-type]
    if problem is not None:
        raise InvalidEntryError(f"dup_status: {problem}")
