"""The KV block pool: free blocks, an LRU prefix cache, and per-request block tables.

Follows docs/vllm-0.33-scheduler.md §2.2-2.4 at block granularity:
- one block of `num_gpu_blocks` is the null block, so `usable = num_gpu_blocks - 1`;
- usage = 1 - free / usable, and cached blocks nobody references count as free;
- allocation reuses unhashed free blocks first, then evicts cached blocks in LRU order;
- a request's blocks are freed tail first, so its tail is evicted before its head.

Content identity is modelled with integer hashes: block j of a request hashes to the key of the
segment that covers it (a shared prefix group, the parent of an n>1 request) or to the request's
own key. Hashes are chained in vLLM, so a lookup stops at the first missing block; a shared
segment only ever covers a prefix, which keeps that property.

Simplification (documented in the engine): a full block is registered unless the same hash is
held by a live request; a stale free copy in the cache does not prevent it. When a block is
freed while a free copy of its hash is already cached, it returns as an unhashed free block.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

SEGMENT_BITS = 24  # block index bits in a hash: max_model_len / block_size stays below 2**24


class BlockOwner(Protocol):
    key: int  # own hash namespace
    shared_blocks: int  # leading blocks covered by shared segments
    nblocks: int
    blocks: list[int]  # hash per block, -1 when unhashed (only kept when caching is on)
    reg_blocks: int  # leading blocks already considered for registration

    def block_hash(self, j: int) -> int: ...


class BlockPool:
    def __init__(self, num_gpu_blocks: int, block_size: int, *, caching: bool) -> None:
        self.usable = max(num_gpu_blocks - 1, 0)
        self.block_size = block_size
        self.caching = caching
        self.free_unhashed = self.usable
        self.cached: OrderedDict[int, None] = OrderedDict()  # free blocks keeping a hash, LRU
        self.live: dict[int, int] = {}  # hash -> number of live requests referencing it

    @property
    def free(self) -> int:
        return self.free_unhashed + len(self.cached)

    @property
    def usage(self) -> float:
        return 1.0 - self.free / self.usable if self.usable else 0.0

    def lookup(self, req: BlockOwner, num_tokens: int) -> tuple[int, int]:
        """(hit blocks, of which evictable): the hit is capped at num_tokens-1 (§2.4)."""
        hits = evictable = 0
        live, cached = self.live, self.cached
        if not live and not cached:
            return 0, 0
        for j in range((num_tokens - 1) // self.block_size):
            h = req.block_hash(j)
            if h in live:
                hits += 1
            elif h in cached:
                hits += 1
                evictable += 1
            else:
                break
        return hits, evictable

    def touch(self, req: BlockOwner, hit_blocks: int) -> None:
        """Take the hit blocks: share a live one, or pull a free cached one out of the queue."""
        live, cached = self.live, self.cached
        for j in range(hit_blocks):
            h = req.block_hash(j)
            if h in live:
                live[h] += 1
            else:
                del cached[h]
                live[h] = 1
            req.blocks.append(h)
        req.nblocks = hit_blocks
        req.reg_blocks = hit_blocks

    def take(self, count: int) -> None:
        """Allocate `count` physical blocks (caller checked `count <= free`)."""
        from_unhashed = min(count, self.free_unhashed)
        self.free_unhashed -= from_unhashed
        cached = self.cached
        for _ in range(count - from_unhashed):
            cached.popitem(last=False)

    def grow(self, req: BlockOwner, count: int) -> None:
        """Give `req` `count` new blocks at the end of its table."""
        self.take(count)
        req.nblocks += count
        if self.caching:
            req.blocks.extend([-1] * count)

    def register(self, req: BlockOwner, upto_tokens: int) -> None:
        """Hash the request's blocks that are full once `upto_tokens` tokens are computed."""
        full = upto_tokens // self.block_size
        if not self.caching or full <= req.reg_blocks:
            return
        live, blocks = self.live, req.blocks
        j = req.reg_blocks
        shared = req.shared_blocks
        while j < full and j < shared:  # blocks of a shared prefix segment
            h = req.block_hash(j)
            if h not in live:
                live[h] = 1
                blocks[j] = h
            j += 1
        base = req.key << SEGMENT_BITS  # the request's own blocks: the common case, inlined
        for k in range(j, full):
            h = base | k
            if h not in live:
                live[h] = 1
                blocks[k] = h
        req.reg_blocks = full

    def release(self, req: BlockOwner) -> None:
        """Free all of the request's blocks, tail first."""
        if not self.caching:
            self.free_unhashed += req.nblocks
        else:
            live, cached = self.live, self.cached
            for h in reversed(req.blocks):
                if h < 0:
                    self.free_unhashed += 1
                    continue
                refs = live[h] - 1
                if refs:
                    live[h] = refs
                    continue
                del live[h]
                if h in cached:  # a stale free copy already keeps this hash
                    self.free_unhashed += 1
                else:
                    cached[h] = None
            req.blocks = []
        req.nblocks = 0
        req.reg_blocks = 0
