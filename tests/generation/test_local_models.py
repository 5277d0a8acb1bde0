"""Local experts' weights: read from local files only, kept loaded in the process (a
writing job per intent would otherwise read them again each time), read again when they
change on disk, and at most LOCAL_MODELS_KEPT of them at once."""

from __future__ import annotations

import os

import pytest

transformers = pytest.importorskip("transformers")

from search.generation import experts  # noqa: E402
from search.generation.experts import ExpertConfigError, ExpertSpec, LocalExpert, load_local  # noqa: E402


def tiny_causal_lm(path) -> str:
    """A random two-layer GPT-2 and a word-level tokenizer, saved as local files."""
    path.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "relu", "kernel", "float", "max"]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(path)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=2, n_head=2, n_positions=64)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return str(path)


@pytest.fixture(autouse=True)
def empty_cache():
    experts._LOADED.clear()
    yield
    experts._LOADED.clear()


def test_a_local_model_is_loaded_once_and_shared_while_its_files_stay_the_same(tmp_path):
    path = tiny_causal_lm(tmp_path / "a")
    model, tokenizer = load_local(path, "cpu")
    assert load_local(path, "cpu")[0] is model
    first = LocalExpert(ExpertSpec(name="a", kind="local", path=path), device="cpu")
    second = LocalExpert(ExpertSpec(name="a2", kind="local", path=path), device="cpu")
    assert first.load()[0] is second.load()[0] is model  # two jobs, one copy of the weights
    assert not any(p.requires_grad for p in model.parameters()) and not model.training
    # Weights replaced on disk are read again.
    config = tmp_path / "a" / "config.json"
    os.utime(config, (config.stat().st_atime, config.stat().st_mtime + 10))
    assert load_local(path, "cpu")[0] is not model


def test_only_the_last_few_models_are_kept(tmp_path):
    paths = [tiny_causal_lm(tmp_path / name) for name in "abc"]
    first = load_local(paths[0], "cpu")[0]
    for path in paths[1:]:
        load_local(path, "cpu")
    assert len(experts._LOADED) == experts.LOCAL_MODELS_KEPT == 2
    assert load_local(paths[0], "cpu")[0] is not first  # it was dropped, and is read again


def test_a_model_that_is_not_on_disk_is_a_message_and_nothing_is_kept(tmp_path):
    with pytest.raises(ExpertConfigError, match="cannot be loaded from local files"):
        load_local(str(tmp_path / "nothing"), "cpu")
    assert not experts._LOADED
