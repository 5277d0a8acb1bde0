"""Expanding an expert's flag-carrying macros (lineage/engine/macros.py)."""

import pytest

from lineage.engine import experts, macros

SOURCE = """#if OPT_RESTRICT
#define IN const float* __restrict__
#else
#define IN const float*
#endif
#if OPT_FAST
#define EXP(v) __expf(v)
#else
#define EXP(v) expf(v)
#endif
#define BLOCK_ITEMS 4  // defined once: stays
#define ROW(p, r) (p + (r) * n)  // defined once, function-like: stays
// IN in a comment, and "IN" in a string, are left alone
__global__ void k(IN x, float* y, int n) { y[0] = EXP(x[0] * EXP(2.0f)) + BLOCK_ITEMS; }
"""


def test_only_the_macros_defined_once_per_branch_carry_a_flag():
    assert macros.flag_carrying(SOURCE) == {"IN", "EXP"}


def test_flag_carrying_macros_are_expanded_where_used_and_their_definitions_dropped():
    plain = "\n".join(line for line in SOURCE.splitlines()
                      if not line.startswith(("#if", "#else", "#endif"))
                      and "__restrict__" not in line and "__expf" not in line) + "\n"
    out = macros.expand(plain, {"IN", "EXP"})
    assert "__global__ void k(const float* x, float* y, int n)" in out
    assert "y[0] = expf(x[0] * expf(2.0f)) + BLOCK_ITEMS;" in out  # nested calls too
    assert "#define IN" not in out and "#define EXP" not in out
    assert "#define BLOCK_ITEMS 4" in out and "#define ROW(p, r)" in out
    assert '// IN in a comment, and "IN" in a string' in out


def test_a_function_like_macro_without_its_arguments_is_a_clear_error():
    with pytest.raises(macros.MacroError, match="without arguments"):
        macros.expand("#define F(v) v\nint a = F;\n", {"F"})
    with pytest.raises(macros.MacroError, match="takes 1 arguments, given 2"):
        macros.expand("#define F(v) v\nint a = F(1, 2);\n", {"F"})


def test_every_expert_state_reads_without_its_flag_macros():
    for task in experts.tasks_with_experts():
        expert = experts.load(task)
        carried = macros.flag_carrying(expert.source)
        for state in (frozenset(), expert.all_on()):
            plain = expert.plain_source(state)
            assert "OPT_" not in plain
            defined = {m.group(1) for line in plain.splitlines() if (m := macros._DEFINE.match(line))}
            assert not defined & carried, f"{task}: {defined & carried} still defined"
