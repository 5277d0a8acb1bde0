"""The policy's text checks and its include decision, without nvcc: directives found in
every spelling the preprocessor accepts, preprocessed text cicc would re-read, paths."""

import contextlib
import os
import time

import pytest

from profiling.harness import policy
from profiling.harness.policy import PolicyViolation, check_dependencies, check_preprocessed, check_source

KERNEL = 'extern "C" __global__ void k(float* y) { y[0] = 1.0f; }\n'


@pytest.mark.parametrize("spelling", [
    '#embed "f"', '  #  embed "f"', '# /* c */ embed "f"', '#\\\nembed "f"', '#em\\\nbed "f"',
    '#\\  \nembed "f"', '%:embed "f"', '%\\\n:embed "f"', '??=embed "f"', '??=em??/\nbed "f"',
    '/* a\nb */ #embed "f"', '#\\u0065mbed "f"', '#embed\r\n', '#line 4 "x"', '# 4 "x"',
    '#pragma GCC dependency "/etc/passwd"', '#pragma /**/ GCC /**/ dependency "/etc/passwd"',
    '#pragma include_alias("a.h", "/etc/passwd")',
])
def test_a_forbidden_directive_is_found_in_every_spelling(spelling):
    with pytest.raises(PolicyViolation) as caught:
        check_source("int a;\n" + spelling + "\n" + KERNEL)
    assert caught.value.guard == "source_policy" and str(caught.value).startswith("line 2: ")


@pytest.mark.parametrize("text", [
    '// #embed "f"\n', 'int s = 1; // #line 3\n', '/* #embed */ int x;\n',
    '#include <cuda_fp16.h>\n', '#pragma unroll\n', '#define E(x) x\n#if 0\n#endif\n',
])
def test_ordinary_directives_and_directives_in_line_comments_pass(text):
    check_source(text + KERNEL)


def test_a_launch_is_found_in_the_code_but_not_in_comments():
    check_source("// k<<<1, 1>>>()\n/* <<<x>>> */\n" + KERNEL)
    with pytest.raises(PolicyViolation, match="line 2: <<<"):
        check_source(KERNEL + "void h() { k<<<1, 1>>>(0); }\n")


@pytest.mark.parametrize("flood", ["/*\n", "#\n", "%:\n", "??=\n", "\\\n", '"', "/*"])
def test_a_flood_of_one_pattern_is_checked_in_bounded_time(flood):
    source = flood * (policy.MAX_SOURCE_BYTES // len(flood) - 1)
    started = time.monotonic()
    with contextlib.suppress(PolicyViolation):  # refused or not, it must be decided quickly
        check_source(source)
    assert time.monotonic() - started < 10


PREPROCESSED = """# 0 "kernel.cu"
# 0 "<built-in>"
# 1 "/usr/local/cuda/include/cuda_runtime.h" 1
#pragma GCC diagnostic push
void cudaStreamCreate(void*);
# 2 "kernel.cu" 2
#pragma unroll
extern "C" __global__ void k(float* y) { y[0] = 1.0f; }
"""


def test_preprocessed_text_with_line_markers_and_pragmas_passes():
    check_preprocessed(PREPROCESSED)


@pytest.mark.parametrize("line, fragment", [
    (' # include "/etc/passwd"', "#include would run"),
    (' %: include "/etc/passwd"', "#include would run"),
    (' # define X 1', "#define would run"),
    ('??=include "/etc/passwd"', "#include would run"),
    ('#\\\ninclude "/etc/passwd"', "#include would run"),
    ('#pragma include_alias("a.h", "/etc/passwd")', "open a file"),
    ('_Pragma("hdrstop")', "_Pragma"),
    ('_Pragma(X)', "_Pragma"),
    ("void h() { k<<<1, 1>>>(0); }", "<<<"),
])
def test_preprocessed_text_that_cicc_would_run_as_a_directive_is_refused(line, fragment):
    with pytest.raises(PolicyViolation) as caught:
        check_preprocessed(PREPROCESSED + line + "\n")
    assert fragment in str(caught.value)
    if fragment == "<<<":
        assert str(caught.value).startswith("line 4: ")  # kernel.cu's own line, from the markers


def test_the_files_line_markers_name_are_listed_once_each():
    text = PREPROCESSED + '# 1 "/odd\\"name\\\\x.h" 1\n'
    assert policy.marker_files(text) == ["kernel.cu", "/usr/local/cuda/include/cuda_runtime.h",
                                         '/odd"name\\x.h']


def test_gcc_header_announcements_are_read():
    output = ". /usr/include/a.h\n.. /usr/include/b.h\nkernel.cu:3:2: warning: x\n! /p/c.h.gch\n"
    assert policy.header_lines(output) == ["/usr/include/a.h", "/usr/include/b.h", "/p/c.h.gch"]


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "include"
    (root / "sub").mkdir(parents=True)
    (root / "ok.h").write_text("")
    (tmp_path / "secret.txt").write_text("")
    os.symlink(tmp_path / "secret.txt", root / "link.h")
    build = tmp_path / "build"
    build.mkdir()
    (build / "kernel.cu").write_text("")
    (build / "kernel.cup").write_text("")
    return build, [str(root)]


@pytest.mark.parametrize("path", ["kernel.cu", "include/ok.h", "include/sub/../ok.h", "missing.h"])
def test_dependencies_inside_the_include_folders_or_the_source_itself_pass(tree, path):
    build, roots = tree
    path = path if not path.startswith("include") else os.path.join(roots[0], path[len("include/"):])
    check_dependencies([path], build, roots, "")


@pytest.mark.parametrize("path", [
    "kernel.cup", "../secret.txt", "include/link.h", "include/../secret.txt", "/etc/passwd",
    "/proc/self/cwd/kernel.cu", "../../missing.h", "/nowhere/missing.h",
])
def test_dependencies_outside_the_include_folders_are_refused_naming_them(tree, path):
    build, roots = tree
    path = os.path.join(roots[0], path[len("include/"):]) if path.startswith("include/") else path
    with pytest.raises(PolicyViolation) as caught:
        check_dependencies(["kernel.cu", path], build, roots, f'#include "{path}"\n')
    assert caught.value.guard == "source_policy"
    assert str(caught.value).startswith(f"line 1: the source includes {path!r}, which is outside")
