"""MoE dispatch and combine on numpy arrays, against a single-process
reference of docs/moe.md (all ranks' inputs in one place)."""

import numpy as np
import pytest

import vigil
from conftest import from_bf16, run_ranks, to_bf16

H = 8
K = 2


def make_inputs(world, experts, max_tokens):
    rng = np.random.default_rng(7)
    ranks = []
    for r in range(world):
        bs = [3, 0, 5, 4][r % 4]  # uneven, one rank with no token
        ids = np.array([rng.choice(experts, K, replace=False) for _ in range(bs)], np.int32).reshape(bs, K)
        if bs > 2:
            ids[1, 1] = -1  # an unused slot
        x = rng.integers(-8, 8, size=(bs, H)).astype(np.float32) / 4
        scales = rng.integers(1, 8, size=(bs, K)).astype(np.float32) / 8
        ranks.append((x, ids, scales))
    assert all(len(x) <= max_tokens for x, _, _ in ranks)
    return ranks


def reference_dispatch(world, shared_ranks, shared, experts, inputs):
    """Per destination rank: the received rows as (local expert, source, token, slot)."""
    local = experts // (world - shared_ranks)
    group = shared_ranks // shared if shared else 1
    rows = {d: [] for d in range(world)}
    for src, (x, ids, _) in enumerate(inputs):
        for t in range(len(x)):
            for k in range(K):
                e = ids[t, k]
                if e >= 0:
                    rows[shared_ranks + e // local].append((e % local, src, t, k))
            for s in range(shared):
                rows[s * group + src % group].append((0, src, t, K + s))
    return {d: sorted(r) for d, r in rows.items()}


CONFIGS = [
    pytest.param(2, 0, 0, 4, id="2 ranks, routed only"),
    pytest.param(3, 1, 1, 4, id="3 ranks, one shared-expert rank"),
    pytest.param(4, 2, 1, 4, id="4 ranks, shared expert on 2 ranks"),
]


@pytest.mark.parametrize("world,shared_ranks,shared,experts", CONFIGS)
def test_dispatch_and_combine_match_the_reference(world, shared_ranks, shared, experts):
    max_tokens = 6
    inputs = make_inputs(world, experts, max_tokens)
    config = vigil.MoeConfig(moe_expert_num=experts, hidden=H, top_k=K, max_tokens_per_rank=max_tokens,
                             shared_expert_num=shared, shared_expert_rank_num=shared_ranks)
    want = reference_dispatch(world, shared_ranks, shared, experts, inputs)

    def body(comm):
        x, ids, scales = inputs[comm.rank]
        d = comm.moe_dispatch(x, ids, config, expert_scales=scales)
        # Identity experts: combine sends expand_x back; every token gets x * (sum of its weights + shared).
        out = comm.moe_combine(d, d.expand_x.copy(), expert_scales=scales)
        assert d.handle.tokens == len(x) and d.handle.recv_rows == d.recv_rows
        return d, out

    for rank, (d, out) in enumerate(run_ranks(world, body)):
        rows = want[rank]
        local = config.local_experts(world, rank)
        assert d.recv_rows == len(rows) and d.expand_x.shape == (len(rows), H)
        assert d.ep_recv_counts.shape == (local, world) and d.expert_token_nums.shape == (local,)
        for i, (j, src, t, slot) in enumerate(rows):
            x, _, scales = inputs[src]
            np.testing.assert_array_equal(d.expand_x[i], x[t])
            assert d.expand_scales[i] == (scales[t, slot] if slot < K else 1.0)
        counts = np.zeros((local, world), np.int64)
        for j, src, _, _ in rows:
            counts[j, src] += 1
        np.testing.assert_array_equal(d.expert_token_nums, counts.sum(1))
        np.testing.assert_array_equal(d.ep_recv_counts.ravel(), np.cumsum(counts.ravel()))
        assert d.dynamic_scales is None
        x, ids, scales = inputs[rank]
        weight = np.where(ids >= 0, scales, 0).sum(1, dtype=np.float32) + shared
        expected = np.where(weight[:, None] > 0, x * weight[:, None], 0)
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=0)


def test_quantised_dispatch_sends_int8_rows_with_scales():
    world, experts = 2, 4
    inputs = make_inputs(world, experts, 6)
    config = vigil.MoeConfig(moe_expert_num=experts, hidden=H, top_k=K, max_tokens_per_rank=6, quant_mode=2)
    want = reference_dispatch(world, 0, 0, experts, inputs)

    def body(comm):
        x, ids, _ = inputs[comm.rank]
        return comm.moe_dispatch(x, ids, config)

    for rank, d in enumerate(run_ranks(world, body)):
        assert d.expand_x.dtype == np.int8 and d.dynamic_scales.shape == (d.recv_rows,)
        for i, (_, src, t, _) in enumerate(want[rank]):
            v = inputs[src][0][t]
            amax = np.abs(v).max()
            scale = np.float32(127) / amax if amax > 0 else np.float32(1)
            q = np.clip(np.rint(v * scale), -127, 127)
            np.testing.assert_array_equal(d.expand_x[i], q)
            assert d.dynamic_scales[i] == np.float32(1) / scale


def test_mode_enums_equal_their_integers():
    assert int(vigil.MoeQuantMode.NONE) == 0 and int(vigil.MoeQuantMode.DYNAMIC_INT8) == 2
    assert int(vigil.MoeExpertTokenNums.PREFIX_SUM) == 0 and int(vigil.MoeExpertTokenNums.COUNT) == 1
    world, experts = 2, 4
    inputs = make_inputs(world, experts, 6)
    common = dict(moe_expert_num=experts, hidden=H, top_k=K, max_tokens_per_rank=6)
    by_value = vigil.MoeConfig(**common, quant_mode=2, expert_token_nums_type=0)
    by_enum = vigil.MoeConfig(
        **common,
        quant_mode=vigil.MoeQuantMode.DYNAMIC_INT8,
        expert_token_nums_type=vigil.MoeExpertTokenNums.PREFIX_SUM,
    )
    assert (by_enum.quant_mode, by_enum.expert_token_nums_type) == (2, 0)

    def body(comm):
        x, ids, _ = inputs[comm.rank]
        return comm.moe_dispatch(x, ids, by_value), comm.moe_dispatch(x, ids, by_enum)

    for a, b in run_ranks(world, body):
        for field in ("expand_x", "dynamic_scales", "expand_scales", "expert_token_nums", "ep_recv_counts"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_bfloat16_rows_and_masks():
    world, experts = 2, 2
    config = vigil.MoeConfig(moe_expert_num=experts, hidden=H, top_k=1, max_tokens_per_rank=4)

    def body(comm):
        x = np.arange(3 * H, dtype=np.float32).reshape(3, H) + 100 * comm.rank
        ids = np.array([[0], [1], [comm.rank]], np.int32)
        mask = np.array([True, False, True])  # the middle token stays home
        d = comm.moe_dispatch(to_bf16(x), ids, config, active_mask=mask, dtype="bfloat16")
        out = comm.moe_combine(d, d.expand_x, dtype="bfloat16")
        return x, d, out

    results = run_ranks(world, body)
    assert [d.recv_rows for _, d, _ in results] == [3, 1]  # expert 0 on rank 0 gets 3 of the 4 active tokens
    for x, d, out in results:
        assert d.expand_x.dtype == np.uint16
        expected = from_bf16(to_bf16(x))
        expected[1] = 0  # masked: combine writes 0
        np.testing.assert_array_equal(from_bf16(out), expected)


def test_moe_refusals():
    config = vigil.MoeConfig(moe_expert_num=4, hidden=H, top_k=K, max_tokens_per_rank=4)

    def body(comm):
        x = np.zeros((2, H), np.float32)
        ids = np.array([[0, 1], [2, 3]], np.int32)
        errors = []
        for bad in (dict(x=x.astype(np.float64)), dict(x=np.zeros((2, H + 1), np.float32)),
                    dict(expert_ids=ids.astype(np.int64)), dict(expert_scales=np.ones((2, 3), np.float32))):
            args = dict(x=x, expert_ids=ids, config=config)
            scales = bad.pop("expert_scales", None)
            args.update(bad)
            with pytest.raises(vigil.InvalidArgumentError) as caught:
                comm.moe_dispatch(args["x"], args["expert_ids"], config, expert_scales=scales)
            errors.append(caught.value)
        # The declared world size must be the communicator's: refused by every rank's handshake.
        wrong = vigil.MoeConfig(moe_expert_num=4, hidden=H, top_k=K, max_tokens_per_rank=4, ep_world_size=8)
        with pytest.raises(vigil.InvalidArgumentError) as caught:
            comm.moe_dispatch(x, ids, wrong)
        errors.append(caught.value)
        return errors

    for errors in run_ranks(2, body):
        assert [e.error_id for e in errors] == ["VG-PY-001"] * 4 + ["VG-MOE-001"]
        assert "int32" in errors[2].cause and "(2, 2)" in errors[3].cause
        assert "epWorldSize 8" in errors[4].cause


def test_a_rank_refused_here_releases_its_peers_at_once():
    # Rank 0's ids are int64 (refused by the binding, VG-PY-001); rank 1's call is fine.
    # Rank 0 still joins the handshake, so rank 1 learns it now (VG-MOE-006), not at its timeout.
    config = vigil.MoeConfig(moe_expert_num=2, hidden=H, top_k=1, max_tokens_per_rank=2)

    def body(comm):
        ids = np.array([[0], [1]], np.int64 if comm.rank == 0 else np.int32)
        with pytest.raises(vigil.Error) as dispatch_error:
            comm.moe_dispatch(np.ones((2, H), np.float32), ids, config)
        d = comm.moe_dispatch(np.ones((2, H), np.float32), ids.astype(np.int32), config)
        bad_rows = np.ones((d.recv_rows, H), np.float64 if comm.rank == 1 else np.float32)
        with pytest.raises(vigil.Error) as combine_error:
            comm.moe_combine(d, bad_rows)
        out = comm.moe_combine(d, d.expand_x)  # the communicator is still usable
        return dispatch_error.value, combine_error.value, out

    (d0, c0, out0), (d1, c1, out1) = run_ranks(2, body, timeout=15)
    assert isinstance(d0, vigil.InvalidArgumentError) and d0.error_id == "VG-PY-001"
    assert isinstance(d1, vigil.RemoteError) and d1.error_id == "VG-MOE-006" and "rank(s) 0" in d1.cause
    assert isinstance(c1, vigil.InvalidArgumentError) and c1.error_id == "VG-PY-001"
    assert isinstance(c0, vigil.RemoteError) and c0.error_id == "VG-MOE-006" and "rank(s) 1" in c0.cause
    # The peers hear the refusing rank's own id (it used to arrive as VG-API-002).
    assert "(rank 0: VG-PY-001)" in d1.cause and "(rank 1: VG-PY-001)" in c0.cause
    np.testing.assert_array_equal(out0, np.ones((2, H)))
    np.testing.assert_array_equal(out1, np.ones((2, H)))


def test_the_peers_hear_the_id_of_a_refusal_found_by_the_library():
    # Rank 1 routes a token to expert 5 of 2: VG-MOE-003 there, and rank 0 is told that id.
    config = vigil.MoeConfig(moe_expert_num=2, hidden=H, top_k=1, max_tokens_per_rank=2)

    def body(comm):
        ids = np.array([[0], [5 if comm.rank == 1 else 1]], np.int32)
        with pytest.raises(vigil.Error) as caught:
            comm.moe_dispatch(np.ones((2, H), np.float32), ids, config)
        return caught.value

    e0, e1 = run_ranks(2, body, timeout=15)
    assert e1.error_id == "VG-MOE-003", e1
    assert isinstance(e0, vigil.RemoteError) and e0.error_id == "VG-MOE-006"
    assert "(rank 1: VG-MOE-003)" in e0.cause, e0.cause


@pytest.mark.parametrize("world,shared_ranks,shared,experts", CONFIGS)
def test_symmetric_dispatch_and_combine_give_the_same_results(world, shared_ranks, shared, experts):
    """symmetric=True: the outputs live in the symmetric heap (peers write rows into them), and expert
    outputs made in the heap are read in place by moe_combine; the results are those of messages."""
    max_tokens = 6
    inputs = make_inputs(world, experts, max_tokens)
    config = vigil.MoeConfig(moe_expert_num=experts, hidden=H, top_k=K, max_tokens_per_rank=max_tokens,
                             shared_expert_num=shared, shared_expert_rank_num=shared_ranks)

    def body(comm):
        x, ids, scales = inputs[comm.rank]
        plain = comm.moe_dispatch(x, ids, config, expert_scales=scales)
        want = comm.moe_combine(plain, plain.expand_x * 2, expert_scales=scales)
        d = comm.moe_dispatch(x, ids, config, expert_scales=scales, symmetric=True)
        assert d.symmetric_rows >= d.recv_rows and plain.symmetric_rows == 0
        comm.peer_view(d.expand_x, (comm.rank + 1) % world)  # a symmetric array: no refusal
        expert_out = comm.symmetric_empty((d.symmetric_rows, H), np.float32)[: d.recv_rows]
        np.multiply(d.expand_x, 2, out=expert_out)
        got = comm.moe_combine(d, expert_out, expert_scales=scales)
        return plain, d, want, got

    for plain, d, want, got in run_ranks(world, body):
        assert d.recv_rows == plain.recv_rows
        np.testing.assert_array_equal(d.expand_x, plain.expand_x)
        np.testing.assert_array_equal(d.expand_scales, plain.expand_scales)
        np.testing.assert_array_equal(d.ep_recv_counts, plain.ep_recv_counts)
        np.testing.assert_array_equal(got, want)


def test_symmetric_quantised_dispatch_matches_messages():
    world, experts = 3, 6
    inputs = make_inputs(world, experts, 6)
    config = vigil.MoeConfig(moe_expert_num=experts, hidden=H, top_k=K, max_tokens_per_rank=6, quant_mode=2)

    def body(comm):
        x, ids, _ = inputs[comm.rank]
        plain = comm.moe_dispatch(x, ids, config)
        d = comm.moe_dispatch(x, ids, config, symmetric=True)
        assert d.expand_x.dtype == np.int8
        return plain, d

    for plain, d in run_ranks(world, body):
        np.testing.assert_array_equal(d.expand_x, plain.expand_x)
        np.testing.assert_array_equal(d.dynamic_scales, plain.dynamic_scales)
