"""A KV cache preallocated per layer and written in place, as gpt-fast does.

transformers' DynamicCache concatenates on every step, copying the whole cache;
this layer keeps one buffer per layer, writes new keys and values at the
current positions, and "crops" by moving a length. It plugs into transformers
through the Cache/CacheLayer interface, so the model code is unchanged.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class InPlaceLayer(DynamicLayer):
    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self.k_buf: torch.Tensor | None = None
        self.v_buf: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        self.device = key_states.device
        self.k_buf = torch.empty(b, h, self.capacity, d, dtype=key_states.dtype, device=self.device)
        self.v_buf = torch.empty(b, h, self.capacity, value_states.shape[-1], dtype=value_states.dtype, device=self.device)
        self.is_initialized = True

    def _grow(self, needed: int) -> None:
        capacity = max(needed, self.capacity * 2)
        for name in ("k_buf", "v_buf"):
            old = getattr(self, name)
            new = old.new_empty(old.shape[0], old.shape[1], capacity, old.shape[3])
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)
        self.capacity = capacity

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        end = self.length + n
        if end > self.capacity:
            self._grow(end)
        self.k_buf[:, :, self.length : end] = key_states
        self.v_buf[:, :, self.length : end] = value_states
        self.length = end
        return self.k_buf[:, :, :end], self.v_buf[:, :, :end]

    @property
    def keys(self):  # transformers reads .keys/.values in a few helpers
        return None if self.k_buf is None else self.k_buf[:, :, : self.length]

    @keys.setter
    def keys(self, value) -> None:
        pass

    @property
    def values(self):
        return None if self.v_buf is None else self.v_buf[:, :, : self.length]

    @values.setter
    def values(self, value) -> None:
        pass

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        self.length = max(0, self.length - abs(tokens_to_remove))

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def reset(self) -> None:
        self.length = 0

    def nbytes(self) -> int:
        if self.k_buf is None:
            return 0
        return self.k_buf.element_size() * self.k_buf.nelement() * 2


class InPlaceCache(Cache):
    """One InPlaceLayer per decoder layer; `truncate(n)` keeps the first n positions."""

    def __init__(self, num_layers: int, capacity: int) -> None:
        super().__init__(layers=[InPlaceLayer(capacity) for _ in range(num_layers)])

    def truncate(self, length: int) -> None:
        for layer in self.layers:
            layer.truncate(length)

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)
