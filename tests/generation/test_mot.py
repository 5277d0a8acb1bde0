"""The latent Mixture-of-Thoughts on tiny models built from configs at random (nothing
downloaded), on the CPU: shapes through the fused forward pass, routing, where the
gradients go, the zero-initialised gate, training on a toy set, generation end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.harness import tasks  # noqa: E402
from search.generation.loop import MoTWriter, generate  # noqa: E402
from search.generation.mot import MixtureOfThoughts, stack_ends, tiny_experts  # noqa: E402

TOY = [  # (intent, kernel line): short, so a few hundred steps can learn them
    ("relu over n floats", "y[i] = fmaxf(x[i], 0.0f);"),
    ("sum of n floats", "atomicAdd(out, x[i]);"),
    ("softmax of each row", "y[i] = __expf(x[i] - m) / s;"),
    ("scale a vector by two", "y[i] = 2.0f * x[i];"),
]


@pytest.fixture(name="mot")
def mot_fixture():
    torch.manual_seed(0)
    return MixtureOfThoughts(tiny_experts(), stacks=2, shared=64, heads=4, k=2)


def primary_alone(mot, name, text):
    mot._call = None
    expert = mot.experts[name]
    with torch.no_grad():
        return expert.model(input_ids=torch.tensor([expert.encode(text)])).logits


def test_stacks_split_the_layers_evenly():
    assert stack_ends(4, 2) == [1, 3]
    assert stack_ends(6, 3) == [1, 3, 5]
    assert stack_ends(2, 2) == [0, 1]
    assert stack_ends(3, 5) == [0, 1, 2]  # never more stacks than layers


def test_the_untrained_fusion_leaves_the_primarys_logits_unchanged(mot):
    text = "relu over n floats"
    for active in (["llama-tiny", "gpt2-tiny"], ["gpt2-tiny", "qwen2-tiny", "llama-tiny"]):
        fused = mot.logits(text, active=active)
        assert torch.equal(fused, primary_alone(mot, active[0], text))


def test_a_trained_gate_changes_the_logits_and_the_shapes_stay_the_primarys(mot):
    with torch.no_grad():
        for fusion in mot.fusions:
            fusion.gate["qwen2-tiny"].fill_(0.5)
    text = "sum of n floats"
    fused = mot.logits(text, active=["qwen2-tiny", "llama-tiny", "gpt2-tiny"])  # widths 32, 64, 48
    alone = primary_alone(mot, "qwen2-tiny", text)
    assert fused.shape == alone.shape == (1, len(text.encode()), 259)
    assert not torch.allclose(fused, alone)


def test_the_router_picks_the_top_k_and_the_best_is_primary(mot):
    with torch.no_grad():
        last = mot.router.layers[-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.1, 0.9, 0.5]))  # llama, gpt2, qwen2
    active, logits = mot.route("anything")
    assert active == ["gpt2-tiny", "qwen2-tiny"] and logits.shape == (3,)
    mot.k = 1
    assert mot.route("anything")[0] == ["gpt2-tiny"]


def test_gradients_reach_only_the_router_and_the_fusion(mot):
    with torch.no_grad():  # open the gates so every fusion parameter is on the loss's path
        for fusion in mot.fusions:
            for gate in fusion.gate.values():
                gate.fill_(0.3)
    loss, _ = mot.loss(*TOY[0], active=["llama-tiny", "gpt2-tiny", "qwen2-tiny"])
    loss.backward()
    for expert in mot.experts.values():
        assert all(not p.requires_grad and p.grad is None for p in expert.model.parameters())
    assert mot.router.layers[0].weight.grad.abs().sum() > 0  # through the peers' weights
    primary_parts = [p for n, p in mot.fusions.named_parameters()
                     if ".llama-tiny" in n or not any(f".{e}" in n for e in mot.names)]
    assert primary_parts and all(p.grad is not None and p.grad.abs().sum() > 0 for p in primary_parts)
    names = {n for n, _ in mot.named_parameters()}
    assert all(n.startswith(("router.", "fusions.")) for n in names)


def test_a_few_hundred_steps_lower_the_loss_well_below_its_start(mot):
    before = mot.mean_loss(TOY)
    report = mot.train_pairs(TOY, steps=300, lr=1e-2, log_every=50)
    after = mot.mean_loss(TOY)
    assert after < 0.5 * before, (before, after, report.losses)
    assert 0 < report.trainable_parameters < report.frozen_parameters
    assert report.tokens > 0 and report.tokens_per_s > 0


def test_the_trained_parts_are_saved_and_loaded_alone(mot, tmp_path):
    mot.train_pairs(TOY, steps=20, lr=1e-2)
    mot.save(tmp_path / "mot.safetensors")
    other = MixtureOfThoughts(tiny_experts(), stacks=2, shared=64, heads=4, k=2)
    other.load_trained(tmp_path / "mot.safetensors")
    text = TOY[1][0]
    assert torch.allclose(mot.logits(text), other.logits(text))
    three = MixtureOfThoughts(tiny_experts(), stacks=1, shared=64, heads=4, k=2)
    with pytest.raises(ValueError, match="stacks"):
        three.load_trained(tmp_path / "mot.safetensors")


def test_generation_runs_end_to_end_and_says_who_wrote_what(mot):
    """A random model writes no kernel: the loop records the fused writer's garbled
    reply as such, naming the primary and its peer, and does not send it to the gate."""
    class NeverCalled:
        def check(self, task, candidate):
            raise AssertionError("a reply that is not a candidate never reaches the gate")

    generation = generate(tasks.get("relu"), "clamp negatives to zero", MoTWriter(mot, max_new_tokens=24),
                          NeverCalled(), rounds=2)
    [attempt] = generation.attempts
    assert attempt.stage == "reply" and not generation.passed and generation.written is None
    assert attempt.writer == "mot:" + "+".join(attempt.experts) and len(attempt.experts) == 2
    assert "```cuda" in attempt.message


def test_the_learning_rate_warms_up_then_follows_a_half_cosine_down_to_a_tenth():
    from search.generation.mot import learning_rate_factor

    assert learning_rate_factor(0.0, "cosine", 0.1) == pytest.approx(0.01)  # never quite zero
    assert learning_rate_factor(0.05, "cosine", 0.1) == pytest.approx(0.5)
    assert learning_rate_factor(0.1, "cosine", 0.1) == pytest.approx(1.0)
    assert learning_rate_factor(0.55, "cosine", 0.1) == pytest.approx(0.55)
    assert learning_rate_factor(1.0, "cosine", 0.1) == pytest.approx(0.1)
    assert learning_rate_factor(0.7, "constant", 0.1) == 1.0
    assert learning_rate_factor(5.0, "cosine", 0.0) == pytest.approx(0.1)  # past the end: the floor


def test_a_batch_averages_its_pairs_and_the_report_says_how_it_was_trained(mot):
    """A step of `batch` pairs moves the parts as the mean of their gradients: the same
    step as one pass over the pairs' mean loss."""
    start = {name: value.clone() for name, value in mot.state_dict().items()}
    report = mot.train_pairs(TOY[:2], steps=1, lr=1e-2, batch=2, schedule="constant", warmup=0.0, seed=3)
    assert report.batch == 2 and report.schedule == "constant" and report.learning_rates == [1e-2]
    assert report.to_dict()["learning_rates"] == [0.01]
    stepped = {name: value.clone() for name, value in mot.state_dict().items()}

    mot.load_state_dict(start)  # the same step by hand, on the mean of the two pairs' losses
    optimizer = torch.optim.AdamW(mot.trainable(), lr=1e-2, weight_decay=0.0)
    mot.train()
    mean = sum(mot.loss(text, target)[0] for text, target in TOY[:2]) / 2
    optimizer.zero_grad()
    mean.backward()
    torch.nn.utils.clip_grad_norm_(mot.trainable(), 1.0)
    optimizer.step()
    mot.eval()
    moved = False
    for name, value in mot.state_dict().items():
        assert torch.allclose(value, stepped[name], atol=1e-6), name
        moved |= not torch.equal(value, start[name])
    assert moved
    with pytest.raises(ValueError, match="batch"):
        mot.train_pairs(TOY, steps=1, batch=0)
    with pytest.raises(ValueError, match="schedule"):
        mot.train_pairs(TOY, steps=1, schedule="step")


def test_fitting_the_experts_whole_lowers_their_loss_then_freezes_them_again():
    """The stand-in for pre-training (bench/mot_h200.py --fit-experts): every parameter of
    each expert learns the pairs, and the experts come back frozen, as a mixture needs."""
    from search.generation.mot import fit_experts

    experts = tiny_experts()
    # A number of steps, not of seconds: a loaded CI host took fewer than 10 in 4 s.
    report = fit_experts(experts, TOY[:2], max_seconds=120.0, max_steps=40, lr=3e-3)
    assert set(report) == {e.name for e in experts}
    for name, row in report.items():
        assert row["steps"] == 40, name
        assert row["last_loss"] < 0.5 * row["first_loss"], (name, row)
    assert not any(p.requires_grad for e in experts for p in e.model.parameters())
    mot = MixtureOfThoughts(experts, stacks=2, shared=64, heads=4, k=2)
    assert all(p.requires_grad for p in mot.trainable()) and mot.trainable()


def test_fitting_no_pairs_is_a_clear_error():
    from search.generation.mot import fit_experts

    with pytest.raises(ValueError, match="no \\(intent, kernel\\) pairs"):
        fit_experts(tiny_experts(), [], max_seconds=1.0)
