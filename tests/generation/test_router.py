"""The router: the configured order until it has learned, then the experts its logged
outcomes favour for a kind of task; saved and loaded only for the same experts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from search.generation.router import (  # noqa: E402
    MIN_OUTCOMES,
    HashingEncoder,
    Outcome,
    Router,
    targets,
)

REDUCE = ["sum the rows of a matrix with a block reduction", "the maximum of n floats, reduced per block",
          "mean of each row, a reduction over the last axis", "sum of squares reduced across a warp"]
GEMM = ["multiply two matrices, tiles in shared memory", "matrix product of A and B in fp32",
        "gemm with a 2d register tile", "batched matrix multiplication of small matrices"]


def outcomes() -> list[Outcome]:
    """hpc-coder writes the reductions that pass, qwen the matrix products."""
    rows = []
    for text in REDUCE:
        rows += [Outcome(text, "hpc-coder", True, True, 1.0), Outcome(text, "qwen", True, False)]
    for text in GEMM:
        rows += [Outcome(text, "qwen", True, True, 2.0), Outcome(text, "hpc-coder", False, False)]
    return rows


def test_the_hashing_encoder_puts_texts_that_share_words_near_each_other():
    encoder = HashingEncoder(256)
    a, b, c = encoder.encode(["sum the rows of a matrix", "sum the rows of a tensor", "launch bounds"])
    assert a @ b > 0.5 > abs(float(a @ c))
    assert torch.allclose(encoder.encode(["sum the rows of a matrix"])[0], a)  # frozen: the same every time


def test_targets_order_passing_kernels_by_speed():
    rows = targets([Outcome("t", "a", True, True, 1.0), Outcome("t", "b", True, True, 2.0),
                    Outcome("t", "c", True, False), Outcome("t", "d", False, False),
                    Outcome("t", "e", True, True, None)])
    assert [y for _, _, y in rows] == [1.0, 0.75, 0.25, 0.0, 0.75]


def test_without_data_the_router_follows_the_configured_order_and_says_so():
    router = Router(["qwen", "hpc-coder", "starcoder"])
    routing = router.route("anything", 2)
    assert routing.active == ("qwen", "hpc-coder") and routing.primary == "qwen"
    assert "configured order" in routing.by and f"needs {MIN_OUTCOMES}" in routing.by
    assert router.route("anything", 9).active == ("qwen", "hpc-coder", "starcoder")


def test_trained_on_outcomes_the_router_picks_the_expert_that_passed_that_kind_of_task():
    router = Router(["qwen", "hpc-coder", "starcoder"], seed=1)
    losses = router.fit(outcomes(), epochs=300)
    assert losses[-1] < 0.5 * losses[0] and router.trained
    assert router.route("row-wise sum reduction of a matrix", 1).primary == "hpc-coder"
    assert router.route("matrix multiplication with shared memory tiles", 1).primary == "qwen"
    assert "trained on 16 outcomes" in router.route("x", 1).by


def test_a_saved_router_loads_only_for_the_same_experts_and_encoder(tmp_path):
    router = Router(["qwen", "hpc-coder"], seed=1)
    router.fit(outcomes(), epochs=50)
    router.save(tmp_path / "router.safetensors")
    loaded = Router.load(tmp_path / "router.safetensors", ["qwen", "hpc-coder"], HashingEncoder())
    assert loaded.trained_on == router.trained_on
    assert loaded.route(GEMM[0], 2).scores == router.route(GEMM[0], 2).scores
    with pytest.raises(ValueError, match="train it again"):
        Router.load(tmp_path / "router.safetensors", ["qwen", "hpc-coder", "new"], HashingEncoder())
    with pytest.raises(ValueError, match="encoder"):
        Router.load(tmp_path / "router.safetensors", ["qwen", "hpc-coder"], HashingEncoder(64))


def tiny_sentence_model(path) -> str:
    """A random BERT of two layers and its word-level tokenizer, saved as local files: what
    TransformersEncoder loads (never downloaded)."""
    transformers = pytest.importorskip("transformers")
    words = sorted({w for text in REDUCE + GEMM for w in text.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    path.mkdir()
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(path)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(path)
    return str(path)


def test_the_transformers_encoder_mean_pools_a_local_model_without_the_padding(tmp_path):
    from search.generation.router import TransformersEncoder

    encoder = TransformersEncoder(tiny_sentence_model(tmp_path / "minilm"))
    assert encoder.name.startswith("transformers:") and encoder.dim == 32
    short, long = encoder.encode([REDUCE[0], GEMM[3]])
    assert short.shape == (32,) and torch.allclose(short.norm(), torch.tensor(1.0))
    # Padded to the longer text's length, the short one is pooled over its own tokens only.
    assert torch.allclose(encoder.encode([REDUCE[0]])[0], short, atol=1e-5)
    assert not any(p.requires_grad for p in encoder.model.parameters())  # frozen


def test_a_router_over_the_transformers_encoder_learns_and_is_saved_with_its_name(tmp_path):
    from search.generation.router import TransformersEncoder

    encoder = TransformersEncoder(tiny_sentence_model(tmp_path / "minilm"))
    router = Router(["qwen", "hpc-coder"], encoder=encoder, seed=1)
    losses = router.fit(outcomes(), epochs=200)
    assert losses[-1] < 0.5 * losses[0]
    router.save(tmp_path / "router.safetensors")
    loaded = Router.load(tmp_path / "router.safetensors", ["qwen", "hpc-coder"], encoder)
    assert loaded.route(GEMM[0], 2).scores == router.route(GEMM[0], 2).scores
    with pytest.raises(ValueError, match="encoder"):
        Router.load(tmp_path / "router.safetensors", ["qwen", "hpc-coder"], HashingEncoder())
