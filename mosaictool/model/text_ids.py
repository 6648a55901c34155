"""Stable text and sub-graph-key hashes (no torch: the methods registry uses them at import).

`text_id` identifies a text in a batch (equal texts = one sub-graph); a record's `subgraph_keys`
(written by `decompose`) become sorted hashes so that "is this text's key true of that image"
(MosaiCLIP's P(i)) is a binary search here and a `searchsorted` in the loss."""

from __future__ import annotations

import functools
import hashlib
from array import array
from bisect import bisect_left


@functools.lru_cache(maxsize=1 << 18)  # the same texts and keys recur in every batch of a run
def text_id(text: str) -> int:
    """A 63-bit hash that is the same in every process (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1 or 1


def key_id(key: str | None) -> int:
    """The stable hash of a canonical sub-graph key (text_id); 0 for no key."""
    return text_id(key) if key else 0


def record_key_ids(record: dict) -> array:
    """A record's sub-graph key hashes, sorted and unique, as an array('q') (empty without
    `subgraph_keys`): 8 bytes a key, compared with == like a list. Training records carry them
    precomputed (`subgraph_key_ids`, training.shards' slim records)."""
    ids = record.get("subgraph_key_ids")
    if ids is None:
        ids = array("q", sorted({key_id(k) for k in record.get("subgraph_keys") or () if k}))
    return ids


def holds_key(key_ids: array, key: str | None) -> bool:
    """Is `key` among the sorted `key_ids` (record_key_ids)?"""
    kid = key_id(key)
    at = bisect_left(key_ids, kid)
    return kid != 0 and at < len(key_ids) and key_ids[at] == kid
