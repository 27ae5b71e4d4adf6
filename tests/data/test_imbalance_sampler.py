"""ImbalancedDatasetSampler: classes drawn equally often, seeded, sharded and resumable."""

import itertools
from collections import Counter

import pytest

from fastreid.data.samplers import ImbalancedDatasetSampler

DATA = [("img", 0)] * 90 + [("img", 1)] * 9 + [("img", 2)] * 1


def take(sampler, n):
    return list(itertools.islice(iter(sampler), n))


def test_each_class_equally_likely():
    draws = take(ImbalancedDatasetSampler(DATA, seed=0, rank=0, world_size=1), 30000)
    per_class = Counter(DATA[i][1] for i in draws)
    for label in (0, 1, 2):
        assert per_class[label] / len(draws) == pytest.approx(1 / 3, abs=0.02)


def test_seeded_sharded_and_resumable():
    a = take(ImbalancedDatasetSampler(DATA, seed=3, rank=0, world_size=1), 250)
    assert a == take(ImbalancedDatasetSampler(DATA, seed=3, rank=0, world_size=1), 250)
    assert a != take(ImbalancedDatasetSampler(DATA, seed=4, rank=0, world_size=1), 250)
    r0 = take(ImbalancedDatasetSampler(DATA, seed=3, rank=0, world_size=2), 125)
    r1 = take(ImbalancedDatasetSampler(DATA, seed=3, rank=1, world_size=2), 125)
    assert a == [x for pair in zip(r0, r1) for x in pair]
    assert take(ImbalancedDatasetSampler(DATA, seed=3, rank=0, world_size=1, start=130), 120) == a[130:]


def test_custom_label_callback_and_errors():
    labels = [0, 0, 0, 1]
    sampler = ImbalancedDatasetSampler(
        range(4), seed=0, callback_get_label=lambda ds, i: labels[i], rank=0, world_size=1
    )
    assert sampler.weights.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 2])
    with pytest.raises(ValueError, match="empty"):
        ImbalancedDatasetSampler([], seed=0)
