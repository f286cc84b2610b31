"""Lineage: where a batch's row came from (``Batch.locate()``)."""

from typing import NamedTuple


class Location(NamedTuple):
    """Where one row of a batch came from, as ``Batch.locate()`` gives it.

    - ``source``: the source's index in a ``Mixture``'s ``sources`` (0 for a single source).
    - ``path``: the file, as the source opened it.
    - ``offset``: the row's first unit in the file: a token index for ``TokenWindows`` and
      ``Documents`` (a document's ``bos`` token), a record index for ``FixedRecords``.
    - ``len``: units in the row: ``seq_len + 1`` tokens for a window, 1 record, a document
      piece's length in ``cu_seqlens`` (its tokens in the step; the step's last piece is one
      token shorter, its last token being a target only).

    A token row's bytes are ``len`` tokens from byte ``1024 + offset * token_bytes`` of the
    shard (after its header of 256 int32); a record's are ``record_bytes`` from byte
    ``offset * record_bytes``.
    """

    source: int
    path: str
    offset: int
    len: int
