"""ElasticSampler's partitions (Horovod 0.28.1's): each rank's stride of the
epoch's unprocessed samples. The size changes are simulated (the sampler's
size() and rank() answer 2, then 3 ranks): the partition is plain Python,
the same on every rank of this session."""

import pytest

import plait.torch.elastic.sampler as sampler_module
from plait.torch.elastic import ElasticSampler


class Ranks:
    def __init__(self, monkeypatch):
        self.size, self.rank = 1, 0
        monkeypatch.setattr(sampler_module, "size", lambda: self.size)
        monkeypatch.setattr(sampler_module, "rank", lambda: self.rank)

    def samplers(self, n, dataset, **kwargs):
        """One sampler per rank of an n-rank job."""
        out = []
        for r in range(n):
            self.size, self.rank = n, r
            out.append(ElasticSampler(dataset, **kwargs))
        return out

    def reset(self, samplers, n, state_dict):
        """The samplers of the next job (n ranks), loaded from state_dict."""
        out = self.samplers(n, list(samplers[0].dataset), shuffle=samplers[0].shuffle,
                            seed=samplers[0].seed)
        for r, s in enumerate(out):
            self.size, self.rank = n, r
            s.load_state_dict(state_dict)
        return out


@pytest.fixture
def ranks(monkeypatch):
    return Ranks(monkeypatch)


@pytest.mark.parametrize("shuffle", [False, True])
def test_size_2_to_3_covers_the_rest_exactly_once(ranks, shuffle):
    data = list(range(50))
    two = ranks.samplers(2, data, shuffle=shuffle, seed=7)
    shares = [list(s) for s in two]
    assert sorted(shares[0] + shares[1]) == data  # 50 over 2: no padding
    batch = 4
    for s in two:
        s.record_batch(0, batch)
        s.record_batch(1, batch)
    done = set(shares[0][:2 * batch]) | set(shares[1][:2 * batch])
    assert two[0].processed_num == two[1].processed_num == 16
    three = ranks.reset(two, 3, two[0].state_dict())
    rest = [i for s in three for i in s]
    # 34 left over 3 ranks: 12 each, 2 repeated as padding.
    assert [len(s) for s in three] == [12, 12, 12]
    assert set(rest) == set(data) - done
    assert len(rest) - len(set(rest)) == 2
    unpadded = [i for s in three for i in list(s)[:11]] + [list(three[0])[11]]
    assert sorted(unpadded) == sorted(set(data) - done)  # each once, padding aside


def test_exactly_once_when_divisible(ranks):
    data = list(range(30))
    two = ranks.samplers(2, data, shuffle=True, seed=3)
    for s in two:
        s.record_batch(0, 3)  # 6 processed, 24 left: 8 per rank at 3 ranks
    three = ranks.reset(two, 3, two[0].state_dict())
    rest = [i for s in three for i in s]
    assert len(rest) == 24 and len(set(rest)) == 24
    done = set(list(two[0])[:3]) | set(list(two[1])[:3])
    assert set(rest) == set(data) - done


def test_set_epoch_forgets_and_reshuffles(ranks):
    data = list(range(12))
    (s,) = ranks.samplers(1, data, shuffle=True, seed=0)
    first = list(s)
    s.record_batch(0, 5)
    s.record_indices([first[6]])
    s.set_epoch(1)
    assert s.processed_num == 0 and s.processed_indices == set()
    assert sorted(s) == data and list(s) != first
    s.set_epoch(0)
    assert list(s) == first  # seed + epoch: the same order on every rank


def test_padding_when_fewer_samples_than_ranks(ranks):
    three = ranks.samplers(3, [0], shuffle=False)
    assert [list(s) for s in three] == [[0], [0], [0]]
    two = ranks.samplers(2, [], shuffle=False)
    assert [list(s) for s in two] == [[], []] and len(two[0]) == 0


def test_state_dict_round_trip_and_horovods_form(ranks):
    (s,) = ranks.samplers(1, list(range(10)), shuffle=False)
    s.record_batch(0, 2)
    s.record_indices([7])
    d = s.state_dict()
    assert d == {"epoch": 0, "processed_num": 2, "processed_indices": {7}}
    (t,) = ranks.samplers(1, list(range(10)), shuffle=False)
    t.load_state_dict(d)
    assert list(t) == [2, 3, 4, 5, 6, 8, 9]
    t.load_state_dict({"epoch": 0, "processed_num": 4})  # Horovod 0.28.1's state_dict
    assert list(t) == [4, 5, 6, 7, 8, 9]


def test_get_indices_and_record_indices(ranks):
    two = ranks.samplers(2, list(range(10)), shuffle=False)
    assert two[1].get_indices(0, 2) == [1, 3]
    assert two[1].get_indices(2, 2) == [9]
    assert two[1].get_indices(3, 2) == []
    two[0].record_indices(two[0].get_indices(0, 2))
    two[0].reset()
    assert 0 not in set(two[0].remaining_indices) and 2 not in set(two[0].remaining_indices)
