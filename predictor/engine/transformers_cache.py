"""transformers' Cache interface over a TorchKV: how transformers' own forward writes the one KV cache in place.

transformers' DynamicCache concatenates on every step, copying the whole cache; here each decoder layer is a
view of its row of the TorchKV's buffers, writes its new keys and values at the cache's length and returns the
valid ones, so the model code is unchanged. The runner (runner.py) moves the length on after the forward, once
for all layers.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

from tabd.predictor.engine.kvcache import TorchKV


class LayerView(DynamicLayer):
    """Layer `index` of a TorchKV as one of transformers' cache layers."""

    def __init__(self, kv: TorchKV, index: int) -> None:
        super().__init__()
        self.kv, self.index = kv, index
        self.device = kv.k.device
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass  # the TorchKV is allocated already

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        kv, i = self.kv, self.index
        if i == 0 and kv.length == 0 and _other_shape(kv, key_states, value_states):
            _reshape(kv, key_states, value_states)  # heads the config did not say as read: the model's own shapes
        start = kv.length
        end = start + key_states.shape[-2]
        kv.ensure(end)
        kv.k[i, :, start:end] = key_states[0]
        kv.v[i, :, start:end] = value_states[0]
        return kv.k[i, :, :end][None], kv.v[i, :, :end][None]

    @property
    def keys(self):  # transformers reads .keys/.values in a few helpers
        return self.kv.k[self.index, :, : self.kv.length][None]

    @keys.setter
    def keys(self, value) -> None:
        pass

    @property
    def values(self):
        return self.kv.v[self.index, :, : self.kv.length][None]

    @values.setter
    def values(self, value) -> None:
        pass

    def get_seq_length(self) -> int:
        return self.kv.length

    def crop(self, tokens_to_remove: int) -> None:
        self.kv.truncate(self.kv.length - abs(tokens_to_remove))

    def reset(self) -> None:
        self.kv.length = 0


def _other_shape(kv: TorchKV, key_states: torch.Tensor, value_states: torch.Tensor) -> bool:
    return (key_states.shape[1], key_states.shape[3], value_states.shape[3]) != (kv.k.shape[1], kv.k.shape[3],
                                                                                 kv.v.shape[3])


def _reshape(kv: TorchKV, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
    layers, _, capacity, _ = kv.k.shape
    kv.k = key_states.new_empty(layers, key_states.shape[1], capacity, key_states.shape[3])
    kv.v = value_states.new_empty(layers, value_states.shape[1], capacity, value_states.shape[3])


class TransformersCache(Cache):
    """A TorchKV as transformers' Cache, for one forward call."""

    def __init__(self, kv: TorchKV) -> None:
        super().__init__(layers=[LayerView(kv, i) for i in range(kv.k.shape[0])])
