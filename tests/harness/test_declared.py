"""Declared tasks: JSON definitions, their numpy-subset references (parsed, never eval'd),
every refusal with the field it is about, and the registry finding them by name.

CPU only, no Django.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from profiling.harness import declared, refexpr, tasks
from profiling.harness.declared import DefinitionError
from profiling.harness.refexpr import Expression, ExpressionRefused


def relu2(**changes) -> dict:
    """y = 2 max(x, 0) over a million floats: the smallest useful definition."""
    return {
        "name": "double-relu",
        "sizes": {"n": 2**20},
        "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
        "reference": {"y": "np.maximum(x, 0) * 2"},
        **changes,
    }


def evaluate(source: str, **arrays) -> np.ndarray:
    sizes = {k: v for k, v in arrays.items() if isinstance(v, int)}
    arrays = {k: v for k, v in arrays.items() if not isinstance(v, int)}
    return Expression(source, arrays=arrays, sizes=sizes).evaluate(arrays, sizes)


@pytest.fixture
def fresh_registry():
    tasks._reset_for_tests()
    yield
    tasks._reset_for_tests()


# --- the expression language ------------------------------------------------------------

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 7))
W = RNG.standard_normal((7, 3))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("np.maximum(x, 0) * 2", np.maximum(X, 0) * 2),
        ("-x ** 2 / 3 + 1", -(X**2) / 3 + 1),
        ("x // 0.5 + x % 0.5", X // 0.5 + X % 0.5),
        ("np.exp(x - np.max(x, axis=1, keepdims=True))", np.exp(X - X.max(axis=1, keepdims=True))),
        ("np.sum(x, axis=(0, 1))", np.sum(X)),
        ("np.mean(x, axis=-1)", X.mean(axis=-1)),
        ("np.where(x > 0, x, 0.1 * x)", np.where(X > 0, X, 0.1 * X)),
        ("(0 < x) * (x <= 1)", ((X > 0) & (X <= 1)).astype(float)),
        ("0 < x <= 1", ((X > 0) & (X <= 1)).astype(float)),
        ("np.matmul(x, w)", X @ W),
        ("np.reshape(x, (N, M))", X.reshape(7, 5)),
        ("np.reshape(x, -1)[1:M * N:2]", X.reshape(-1)[1:35:2]),
        ("x[:, None, 1:N - 1] * 2", X[:, None, 1:6] * 2),
        ("x[..., 0]", X[..., 0]),
        ("np.transpose(x)[M - 1]", X.T[4]),
        ("np.argmax(x, axis=1)", np.argmax(X, axis=1).astype(float)),
        ("np.clip(np.tanh(x), -0.5, 0.5) + np.sqrt(np.abs(x)) + np.log1p(np.abs(x))",
         np.clip(np.tanh(X), -0.5, 0.5) + np.sqrt(np.abs(X)) + np.log1p(np.abs(X))),
        ("np.pi * M + np.e", np.pi * 5 + np.e),
    ],
)
def test_an_expression_computes_what_numpy_computes_in_float64(source, expected):
    result = evaluate(source, x=X.astype(np.float32), w=W.astype(np.float32), M=5, N=7)

    assert result.dtype == np.float64
    np.testing.assert_allclose(result, np.asarray(expected, dtype=np.float64), rtol=1e-6, atol=1e-6)


def test_the_shape_walk_agrees_with_numpy_and_computes_nothing():
    source = "np.sum(np.matmul(x, w)[:, None, :] * x[:, :, None], axis=1)"
    expression = Expression(source, arrays=["x", "w"], sizes=["M"])

    assert expression.shape_of({"x": (5, 7), "w": (7, 3)}, {"M": 5}) == (5, 3)
    assert expression.evaluate({"x": X, "w": W}, {"M": 5}).shape == (5, 3)
    # At a size whose arrays would need 80 GB, the walk answers at once.
    assert expression.shape_of({"x": (2**16, 2**12), "w": (2**12, 1)}, {"M": 5}) == (2**16, 1)


def test_an_expression_leaves_its_inputs_alone():
    x = X.astype(np.float32)
    before = x.copy()

    evaluate("x * 0 + np.maximum(x, 1)", x=x)

    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("__import__('os').system('true')", "is not allowed; allowed: np.abs"),
        ("__import__('os')", "calling '__import__' is not allowed"),
        ("np.__class__", "attribute 'np.__class__' is not allowed"),
        ("x.__class__.__bases__", "attribute 'x.__class__.__bases__' is not allowed"),
        ("np.load('/etc/passwd')", "calling 'np.load' is not allowed"),
        ("np.lib.stride_tricks.as_strided(x)", "calling 'np.lib.stride_tricks.as_strided' is not allowed"),
        ("x.sum()", "calling 'x.sum' is not allowed"),
        ("np.exp", "np.exp must be called"),
        ("np", "np alone is not a value"),
        ("(lambda: 1)()", "calling 'lambda: 1' is not allowed"),
        ("lambda: x", "lambda is not allowed"),
        ("[v for v in x]", "comprehensions is not allowed"),
        ("(v for v in x)", "comprehensions is not allowed"),
        ("x if x else 0", "use np.where"),
        ("x and 1", "and/or"),
        ("'abc'", "strings not allowed"),
        ("[x, x]", "lists is not allowed"),
        ("(y := x)", ":= is not allowed"),
        ("os", "unknown name 'os' (known: M, x)"),
        ("np.sum(x, out=x)", "np.sum does not take out="),
        ("np.exp(x, x)", "np.exp takes 1 argument"),
        ("np.sum(*x)", "np.sum takes 1 argument"),
        ("np.sum(x, **{'axis': 1})", "np.sum does not take **="),
        ("x[x > 0]", "is not a whole number"),
        ("x[0.5]", "is not a whole number"),
        ("np.sum(x, axis=x)", "is not a whole number"),
        ("np.sum(x, keepdims=1)", "keepdims must be True or False"),
        ("x[::0]", "step may not be zero"),
        ("x[9]", "index '9' on shape (5, 7)"),
        ("np.sum(x, axis=2)", "axis 2 is out of range"),
        ("np.matmul(x, x)", "inner dimensions differ"),
        ("np.reshape(x, (3, -1))", "cannot reshape (5, 7)"),
        ("x + np.reshape(x, (7, 5))", "do not broadcast"),
        ("x ** 2" + " + x" * 400, "longer than 1000 characters"),
        ("-" * 40 + "x", "nested more than 30 deep"),
        ("(" * 300 + "x" + ")" * 300, "cannot parse it"),
        ("x +", "cannot parse it"),
        ("1e999", "too large"),
        ("9" * 400, "too large"),
        ("", "expected an expression"),
    ],
)
def test_anything_outside_the_subset_is_refused_with_a_reason(source, words):
    with pytest.raises(ExpressionRefused) as caught:
        evaluate(source, x=X, M=5)

    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_expression_is_never_given_to_eval_or_exec(monkeypatch):
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("eval/exec was called")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)

    np.testing.assert_array_equal(evaluate("np.maximum(x, 0) * 2", x=X), np.maximum(X, 0) * 2)


def test_intermediates_and_matmuls_above_the_limits_are_refused_before_any_work():
    outer = Expression("np.sum(x[:, None] * x[None, :], axis=1)", arrays=["x"], sizes=[])
    product = Expression("np.matmul(a, b)", arrays=["a", "b"], sizes=[])

    with pytest.raises(refexpr.TooLarge, match="more than 268435456"):
        outer.shape_of({"x": (2**16,)}, {})
    with pytest.raises(refexpr.TooLarge, match="multiply-adds"):
        product.shape_of({"a": (2**13, 2**13), "b": (2**13, 2**13)}, {})
    with pytest.raises(refexpr.TooLarge):  # the real walk checks before it allocates
        outer.evaluate({"x": np.zeros(2**16)}, {})


# --- definitions ---------------------------------------------------------------------------


def test_a_definition_becomes_a_task_whose_reference_matches_numpy():
    definition, task = declared.declare(relu2(description="y = 2 max(x, 0)"))

    assert task.name == "user-double-relu" == definition["name"]
    assert task.sizes == {"n": 2**20}
    x = np.random.default_rng(1).standard_normal(1031).astype(np.float32)
    y = task.reference({"x": x}, {"n": 1031})["y"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.maximum(x, 0) * 2)
    assert task.bytes(task.sizes) == 8 * 2**20  # x read once, y written once
    assert task.flops(task.sizes) == 0.0
    assert task.naive_source == ""
    assert task.naive_plan["launches"][0] | {"grid": None} == {
        "kernel": "double_relu", "grid": None, "block": ["BLOCK"], "shared_bytes": 0, "args": ["x", "y", "n"]}


def test_small_sizes_are_generated_odd_small_and_within_the_full_size():
    definition, task = declared.declare(relu2(sizes={"M": 4096, "N": 8192},
                                             inputs=[{"name": "x", "shape": ["M", "N"]}],
                                             outputs=[{"name": "y", "shape": ["M", "N"]}]))

    assert definition["l0_sizes"] == [dict(s) for s in task.l0_sizes]
    assert {"M": 1, "N": 1} in task.l0_sizes
    for sizes in task.l0_sizes:
        assert all(v == 1 or v % 2 == 1 for v in sizes.values()), sizes
        assert sizes["M"] <= 4096 and sizes["N"] <= 8192
        assert sizes["M"] * sizes["N"] <= declared.L0_MAX_ELEMENTS
    assert len({tuple(s.items()) for s in task.l0_sizes}) == len(task.l0_sizes) >= 4


def test_a_softmax_with_an_int32_input_and_output_and_its_own_tolerances():
    definition, task = declared.declare({
        "name": "pick-argmax",
        "sizes": {"B": 512, "C": 1000},
        "inputs": [{"name": "logits", "shape": ["B", "C"]},
                   {"name": "bias", "dtype": "int32", "shape": ["C"], "range": [-3, "3"]}],
        "outputs": [{"name": "best", "dtype": "int32", "shape": ["B"]},
                    {"name": "p", "shape": ["B", "C"]}],
        "reference": {
            "best": "np.argmax(logits + bias, axis=1)",
            "p": "np.exp(logits - np.max(logits, axis=1, keepdims=True)) / "
                 "np.sum(np.exp(logits - np.max(logits, axis=1, keepdims=True)), axis=1, keepdims=True)",
        },
        "tolerances": {"float32": {"atol": 1e-7, "rtol": 1e-5}},
        "l0_sizes": [{"B": 3, "C": 7}, {"B": 1, "C": 1031}],
        "distributions": ["uniform"],
        "flops": "5 * B * C",
    })

    assert task.tolerance_for("float32").rtol == 1e-5 and task.tolerance_for("int32").atol == 0
    assert task.inputs[1].refresh == "int:-3:3" and task.distributions == ("uniform",)
    rng = np.random.default_rng(0)
    inputs = {t.name: t.make(rng, {"B": 3, "C": 7}, "uniform") for t in task.inputs}
    assert inputs["bias"].dtype == np.int32 and inputs["bias"].min() >= -3 and inputs["bias"].max() < 3
    out = task.reference(inputs, {"B": 3, "C": 7})
    assert out["best"].dtype == np.int32
    best = np.argmax(inputs["logits"].astype(np.float64) + inputs["bias"], axis=1)
    np.testing.assert_array_equal(out["best"], best)
    np.testing.assert_allclose(out["p"].sum(axis=1), 1.0, rtol=1e-6)
    assert task.flops(task.sizes) == 5 * 512 * 1000


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"name": "Double Relu"}, "name", "a slug"),
        ({"name": "relu"}, None, None),  # becomes user-relu: never the suite's relu
        ({"colour": "red"}, "colour", "unknown field"),
        ({"sizes": {}}, "sizes", "an object of size names"),
        ({"sizes": {"n": 0}}, "sizes.n", "a whole number from 1"),
        ({"sizes": {"n": True}}, "sizes.n", "a whole number from 1"),
        ({"sizes": {"n": 2**40}}, "sizes.n", "a whole number from 1"),
        ({"sizes": {"np": 4}}, "sizes.np", "a name like x"),
        ({"inputs": []}, "inputs", "a list of 1 to 8 tensors"),
        ({"inputs": [{"name": "x", "shape": ["m"]}]}, "inputs[0].shape", "unknown name 'm'"),
        ({"inputs": [{"name": "x", "shape": ["n"], "dtype": "float64"}]}, "inputs[0].dtype", "one of"),
        ({"inputs": [{"name": "x", "shape": []}]}, "inputs[0].shape", "a list of 1 to 6"),
        ({"inputs": [{"name": "x", "shape": ["n - 65537"]}],
          "outputs": [{"name": "y", "shape": ["n - 65537"]}]}, "l0_sizes", "no small sizes"),
        ({"inputs": [{"name": "x", "shape": ["n", "n"]}]}, "inputs[0].shape", "at most 268435456"),
        ({"inputs": [{"name": "x", "shape": ["n ** 64"]}]}, "inputs[0].shape", "('about 10**385',): at most"),
        ({"inputs": [{"name": "x", "shape": ["n"], "range": [0, 9]}]}, "inputs[0].range", "only int32"),
        ({"inputs": [{"name": "x", "dtype": "int32", "shape": ["n"]}]}, "inputs[0].range", "needs [lo, hi]"),
        ({"inputs": [{"name": "x", "dtype": "int32", "shape": ["n"], "range": [5, 5]}]}, "inputs[0].range",
         "needs lo < hi"),
        ({"outputs": [{"name": "x", "shape": ["n"]}], "reference": {"x": "x"}}, "outputs[0].name",
         "already a size or tensor name"),
        ({"outputs": [{"name": "n", "shape": ["n"]}], "reference": {"n": "x"}}, "outputs[0].name",
         "already a size or tensor name"),
        ({"reference": {"z": "x"}}, "reference", "one expression per output"),
        ({"reference": {"y": "__import__('os')"}}, "reference.y", "not allowed"),
        ({"reference": {"y": "np.log(x)"}}, "reference.y", "NaN or infinity"),
        ({"reference": {"y": "x / 0"}}, "reference.y", "NaN or infinity"),
        ({"reference": {"y": "np.sum(x)"}}, "reference.y", "gives shape ()"),
        ({"reference": {"y": "x[1:]"}}, "reference.y", "it gives shape (1048575,), but y is (1048576,)"),
        ({"reference": {"y": "np.exp(x * 1000)"}}, "reference.y", "NaN or infinity"),
        ({"outputs": [{"name": "y", "dtype": "int32", "shape": ["n"]}]}, "reference.y", "whole numbers"),
        ({"tolerances": {"float32": {"atol": -1}}}, "tolerances.float32.atol", "finite number >= 0"),
        ({"tolerances": {"float32": {"atol": float("nan"), "rtol": 0}}}, "tolerances.float32.atol", "finite"),
        ({"tolerances": {"float32": {"atol": float("inf")}}}, "tolerances.float32.atol", "finite"),
        ({"tolerances": {"float16": {"atol": 0}}}, "tolerances.float16", "tolerances are for"),
        ({"distributions": ["normal", "cauchy"]}, "distributions", "a non-empty list of"),
        ({"flops": "n * m"}, "flops", "unknown name 'm'"),
        ({"bytes": "0 - n"}, "bytes", "needs a finite number >= 0"),
        ({"l0_sizes": [{"n": 1}, {"m": 3}]}, "l0_sizes[1]", "give exactly the sizes n"),
        ({"l0_sizes": [{"n": 2**21}]}, "inputs[0].shape", "at most 1048576"),
        ({"description": "two\nlines"}, "description", "one line"),
        ({"format": 2}, "format", "reads format 1"),
    ],
)
def test_every_refusal_names_its_field_in_one_line(changes, path, words):
    if path is None:
        assert declared.declare(relu2(**changes))[1].name == "user-relu"
        return
    with pytest.raises(DefinitionError) as caught:
        declared.declare(relu2(**changes))

    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    assert caught.value.field == path.split(".")[0].split("[")[0]
    assert words in message and "\n" not in message


def test_a_definition_that_is_not_an_object_is_refused():
    with pytest.raises(DefinitionError, match="^definition: a task definition is a JSON object"):
        declared.declare(["not", "an", "object"])


@pytest.mark.parametrize(("slug", "owner", "name"), [
    ("double-relu", 7, "user-double-relu.7"), ("user-double-relu", 7, "user-double-relu.7"),
    ("conv-2", 12, "user-conv-2.12"),
])
def test_a_task_declared_in_the_app_is_named_for_its_owner(slug, owner, name):
    assert declared.owned_name(slug, owner) == name
    _, task = declared.declare(relu2(name=name))

    kernel = slug.removeprefix("user-").replace("-", "_")  # the slug's, without the owner
    assert task.name == name and task.naive_plan["launches"][0]["kernel"] == kernel


@pytest.mark.parametrize("slug", ["double-relu.3", "user-double-relu.7", "Double", "", None, "a" * 49])
def test_an_owners_name_is_made_from_a_slug_alone(slug):
    with pytest.raises(DefinitionError, match="a slug"):
        declared.owned_name(slug, 7)


# --- files and the registry --------------------------------------------------------------------


def test_a_definition_is_written_atomically_once_and_never_replaced_by_another(tmp_path):
    definition, _ = declared.declare(relu2())

    path = declared.write_definition(definition, tmp_path)

    assert path == tmp_path / "user-double-relu.json"
    assert json.loads(path.read_text()) == definition
    assert declared.write_definition(definition, tmp_path) == path  # the same again: harmless
    other, _ = declared.declare(relu2(reference={"y": "np.maximum(x, 0) * 3"}))
    with pytest.raises(DefinitionError, match="^name: a different task named 'user-double-relu'"):
        declared.write_definition(other, tmp_path)
    assert json.loads(path.read_text()) == definition
    assert [p.name for p in tmp_path.iterdir()] == ["user-double-relu.json"]  # no temporary left


def test_a_declared_task_in_the_task_path_is_known_by_name(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    assert "user-double-relu" not in [t.name for t in tasks.all_tasks()]

    declared.write_definition(declared.declare(relu2())[0], tmp_path)  # after the first lookup

    task = tasks.get("user-double-relu")
    assert task.sizes == {"n": 2**20} and "relu" in [t.name for t in tasks.all_tasks()]
    x = np.linspace(-2, 2, 17, dtype=np.float32)
    np.testing.assert_array_equal(task.reference({"x": x}, {"n": 17})["y"], np.maximum(x, 0) * 2)
    (tmp_path / "user-double-relu.json").unlink()
    assert "user-double-relu" not in [t.name for t in tasks.all_tasks()]


def test_a_broken_or_misnamed_json_file_is_an_error_naming_the_file(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    definition, _ = declared.declare(relu2())
    (tmp_path / "user-other.json").write_text(json.dumps(definition))
    with pytest.raises(tasks.TaskDefinitionError, match="user-other.json.*must be user-double-relu.json"):
        tasks.all_tasks()
    (tmp_path / "user-other.json").write_text(json.dumps({**definition, "reference": {"y": "eval('1')"}}))
    with pytest.raises(tasks.TaskDefinitionError, match="reference.y: calling 'eval' is not allowed"):
        tasks.get("user-other")


def test_a_python_task_may_not_take_the_declared_prefix(tmp_path, monkeypatch, fresh_registry):
    (tmp_path / "sneaky.py").write_text(
        "from profiling.harness.tasks.relu import TASK as RELU\n"
        "import dataclasses\n"
        "TASK = dataclasses.replace(RELU, name='user-double-relu')\n"
    )
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    with pytest.raises(tasks.TaskDefinitionError, match="kept for tasks declared as JSON"):
        tasks.all_tasks()


def test_add_directory_puts_a_folder_on_the_task_path_once(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.setenv("OPTIML_TASK_PATH", "")
    declared.write_definition(declared.declare(relu2())[0], tmp_path)

    tasks.add_directory(tmp_path)
    tasks.add_directory(tmp_path)

    assert os.environ["OPTIML_TASK_PATH"] == str(tmp_path)
    assert tasks.get("user-double-relu").name == "user-double-relu"
