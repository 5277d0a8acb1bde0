"""Generalised rewrites from concrete steps, by anti-unification (as Getafix does for fixes).

A step is a pair of kernels, before and after. Its **edit** is the smallest syntax node of
the before-kernel that holds every changed token, lifted until the after-kernel has a node
of the same kind over the same stretch of unchanged context (so both sides are whole
statements, declarations, loops or parameter lists), with the kind of its parent as one
level of context.

Edits of several steps are **anti-unified** pairwise over their tree-sitter CUDA trees:
where the before-trees agree (the same node kinds and the same tokens) the pattern keeps
them; where they differ, a hole (`?0`, `?1`, ...). The same tuple of differing texts is
always the same hole, in the before-side and in the after-side alike, so what a step
carried over (a name, a constant, a sub-expression) stays connected to where it lands.
An after-side part that differs across the steps and is not one of the before-side's
holes cannot be instantiated from a match: such a rewrite is `open` (an LLM, given the
card, could still materialise it; a pattern alone cannot).

A pattern **matches** a node of another kernel when the kinds and tokens agree and each
hole binds one subtree consistently (the same text at every occurrence); it is
**instantiated** by printing the after-side with the holes' texts, and the kernel is the
old source with the matched node's bytes replaced. Nothing here says the result is right:
like every proposal, it goes through the gate.

Pure: tree-sitter in, plain data out.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from search.engine.rewrites.syntax import parse

# Node kinds an edit may be lifted to: whole units a person would point at.
ANCHOR_KINDS = frozenset({
    "function_definition", "parameter_list", "parameter_declaration", "declaration",
    "expression_statement", "for_statement", "while_statement", "do_statement", "if_statement",
    "compound_statement", "return_statement", "preproc_def", "preproc_call", "attributed_statement",
    "field_declaration", "type_definition", "translation_unit",
    # expressions a step may change alone (`expf(v)` -> `__expf(v)`)
    "call_expression", "assignment_expression", "init_declarator", "argument_list",
})
# A pattern with fewer concrete tokens than this matches nearly anything: too general
# (`expf(?0)` has three: the name and its parentheses).
MIN_CONCRETE_TOKENS = 3


@dataclass(frozen=True)
class Term:
    """A syntax node as plain data: a leaf has `text`; an inner node has children."""

    kind: str
    text: str | None = None
    children: tuple[Term, ...] = ()
    # A leaf's layout: the whitespace before it where it was written (comments dropped),
    # None when unknown. Not part of what a term is: two `(` are the same token.
    space: str | None = field(default=None, compare=False)

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class Hole:
    index: int


Pattern = Term | Hole


# Tokens tree-sitter splits that are one token to the compiler: kept whole, as written.
_ATOMS = frozenset({"string_literal", "char_literal", "system_lib_string", "raw_string_literal"})


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def layout(root: Node, raw: bytes) -> dict[int, str]:
    """Each leaf's whitespace before it (node id -> text), comments dropped."""
    gaps, end = {}, 0
    for leaf in _leaf_nodes(root):
        gaps[leaf.id] = _COMMENT.sub("", raw[end:leaf.start_byte].decode(errors="replace"))
        end = leaf.end_byte
    return gaps


def term_of(node: Node, gaps: dict[int, str] | None = None) -> Term:
    if node.child_count == 0 or node.type in _ATOMS:
        return Term(node.type, (node.text or b"").decode(), space=gaps.get(node.id) if gaps else None)
    return Term(node.type, None, tuple(term_of(child, gaps) for child in node.children
                                       if child.type != "comment"))


def leaves(term: Term) -> list[str]:
    if term.is_leaf:
        return [term.text or ""]
    return [text for child in term.children for text in leaves(child)]


def render(tokens: list[str]) -> str:
    """Tokens as compilable CUDA: a space between two, none around punctuation that needs
    none. (Only the rewritten node is printed this way; the rest keeps its layout.)"""
    out = ""
    for token in tokens:
        glued = (token in _NO_SPACE_BEFORE or out[-1:] in _NO_SPACE_AFTER or out.endswith("->")
                 or (token in {"(", "["} and (out[-1:].isalnum() or out[-1:] in {"_", ")", "]"})))
        out = out + token if not out or glued else f"{out} {token}"
    return out


_NO_SPACE_BEFORE = frozenset({",", ";", ")", "]", ".", "->", "++", "--"})
_NO_SPACE_AFTER = frozenset({"(", "[", ".", "!", "~"})


def text_of(term: Term) -> str:
    return render(leaves(term))


def render_laid_out(pieces: list[tuple[str | None, str]]) -> str:
    """(space, text) pieces as source: each with the layout it was written with where
    known (the first one's dropped: it starts where the replaced node started), else as
    `render` spaces tokens."""
    out = ""
    for space, text in pieces:
        if not out:
            out = text
        elif space is not None:
            out += space + text
        else:
            out = render([out, text]) if out[-1:] not in " \n\t" else out + text
    return out


# --- edits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One step's change: `before` becomes `after`, under a parent of kind `context`."""

    kind: str
    context: str
    before: Term
    after: Term


def _leaf_nodes(node: Node) -> list[Node]:
    if node.child_count == 0 or node.type in _ATOMS:
        return [node] if node.type != "comment" else []
    return [leaf for child in node.children for leaf in _leaf_nodes(child)]


def _span(node: Node, index: dict[int, int]) -> tuple[int, int]:
    found = _leaf_nodes(node)
    if not found:
        return (0, 0)
    return index[found[0].id], index[found[-1].id] + 1


def edit_of(before_source: str, after_source: str) -> Edit | None:
    """The step's one edit covering every change (see the module docstring); None when
    nothing changed."""
    found = edits_of(before_source, after_source, merge=True)
    return found[0] if found else None


def edits_of(before_source: str, after_source: str, *, merge: bool = False) -> list[Edit]:
    """The step's edits: each stretch of changed tokens (a token-level diff) lifted to the
    smallest whole unit that holds it and has a twin of its kind in the after-kernel over
    the same unchanged context. Stretches that land in one unit are one edit. With
    `merge`, one edit covers them all."""
    before_tree, after_tree = parse(before_source), parse(after_source)
    before_leaves, after_leaves = _leaf_nodes(before_tree.root_node), _leaf_nodes(after_tree.root_node)
    before_gaps = layout(before_tree.root_node, before_source.encode())
    after_gaps = layout(after_tree.root_node, after_source.encode())
    a = [(n.type, n.text) for n in before_leaves]
    b = [(n.type, n.text) for n in after_leaves]
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    regions = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
    if not regions or not a:
        return []
    if merge:
        regions = [(regions[0][0], regions[-1][1], regions[0][2], regions[-1][3])]
    before_index = {n.id: i for i, n in enumerate(before_leaves)}
    after_by_span = _nodes_by_span(after_tree.root_node, {n.id: i for i, n in enumerate(after_leaves)})
    found: list[tuple[int, int, Edit]] = []
    covered_until = -1
    for i1, i2, _j1, _j2 in regions:
        if i2 <= covered_until and i1 < covered_until:
            continue  # inside the previous edit
        first, last = min(i1, len(a) - 1), max(min(i2, len(a)) - 1, min(i1, len(a) - 1))
        node = _covering(before_leaves[first], before_leaves[last])
        while node is not None:
            start, end = _span(node, before_index)
            whole = start <= i1 and end >= i2 and not any(
                (r1 < start < r2) or (r1 < end < r2) for r1, r2, _, _ in regions)
            if whole and node.type in ANCHOR_KINDS:
                twin = after_by_span.get((_map(opcodes, start, True, len(b)),
                                          _map(opcodes, end, False, len(b)), node.type))
                if twin is not None:
                    parent = node.parent.type if node.parent is not None else ""
                    found.append((start, end, Edit(node.type, parent, term_of(node, before_gaps),
                                                   term_of(twin, after_gaps))))
                    covered_until = end
                    break
            node = node.parent
    # An edit inside another's node is part of it: applying the outer one makes it.
    return [edit for start, end, edit in found
            if not any(s <= start and end <= e and (s, e) != (start, end) for s, e, _ in found)]


def _map(opcodes, x: int, is_start: bool, after_length: int) -> int:
    """Where before-token boundary `x` falls in the after-kernel."""
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal" and (i1 <= x < i2 if is_start else i1 < x <= i2):
            return j1 + (x - i1)
        if tag != "equal" and x == (i1 if is_start else i2):
            return j1 if is_start else j2
    return after_length if is_start else 0


def _covering(first: Node, last: Node) -> Node:
    node = first
    while node.parent is not None and node.end_byte < last.end_byte:
        node = node.parent
    return node


def _nodes_by_span(root: Node, index: dict[int, int]) -> dict[tuple[int, int, str], Node]:
    found: dict[tuple[int, int, str], Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        span = _span(node, index)
        found.setdefault((*span, node.type), node)
        if node.type not in _ATOMS:
            stack.extend(node.children)
    return found


# --- anti-unification -------------------------------------------------------------------


@dataclass
class Rewrite:
    """A generalised rewrite: `before` with holes becomes `after` with the same holes."""

    kind: str
    context: str
    before: Pattern
    after: Pattern
    holes: int
    examples: int
    concrete_tokens: int
    open: bool = False  # the after-side has parts no match can supply
    bindings: list[list[str]] = field(default_factory=list)  # per hole, the examples' texts

    @property
    def usable(self) -> bool:
        return not self.open and self.concrete_tokens >= MIN_CONCRETE_TOKENS

    def to_dict(self) -> dict[str, Any]:
        """As text for people (`before`, `after`) and as trees to apply again (`tree`)."""
        return {"kind": self.kind, "context": self.context, "before": show(self.before),
                "after": show(self.after), "holes": self.holes, "examples": self.examples,
                "concrete_tokens": self.concrete_tokens, "open": self.open, "usable": self.usable,
                "bindings": self.bindings,
                "tree": {"kind": self.kind, "context": self.context, "before": pattern_to_dict(self.before),
                         "after": pattern_to_dict(self.after), "holes": self.holes,
                         "examples": self.examples, "concrete_tokens": self.concrete_tokens,
                         "open": self.open}}


def pattern_to_dict(pattern: Pattern) -> dict[str, Any]:
    if isinstance(pattern, Hole):
        return {"hole": pattern.index}
    if pattern.is_leaf:
        return {"kind": pattern.kind, "text": pattern.text, "space": pattern.space}
    return {"kind": pattern.kind, "children": [pattern_to_dict(c) for c in pattern.children]}


def pattern_from_dict(data: dict[str, Any]) -> Pattern:
    if "hole" in data:
        return Hole(int(data["hole"]))
    if "children" in data:
        return Term(str(data["kind"]), None, tuple(pattern_from_dict(c) for c in data["children"]))
    space = data.get("space")
    return Term(str(data["kind"]), str(data.get("text") or ""),
                space=space if isinstance(space, str) else None)


def rewrite_from_dict(data: dict[str, Any]) -> Rewrite:
    """A rewrite stored by Rewrite.to_dict()["tree"] (a card file), ready to apply."""
    return Rewrite(kind=data["kind"], context=data.get("context", ""),
                   before=pattern_from_dict(data["before"]), after=pattern_from_dict(data["after"]),
                   holes=int(data.get("holes", 0)), examples=int(data.get("examples", 0)),
                   concrete_tokens=int(data.get("concrete_tokens", 0)), open=bool(data.get("open")))


class _Holes:
    def __init__(self) -> None:
        self.by_texts: dict[tuple[str, ...], int] = {}

    def hole(self, texts: tuple[str, ...]) -> Hole:
        if texts not in self.by_texts:
            self.by_texts[texts] = len(self.by_texts)
        return Hole(self.by_texts[texts])


def _alike(terms: tuple[Term, ...]) -> bool:
    first = terms[0]
    return all(t.kind == first.kind and len(t.children) == len(first.children) for t in terms)


def _au(terms: tuple[Term, ...], holes: _Holes) -> Pattern:
    first = terms[0]
    if _alike(terms):
        if first.is_leaf and all(t.text == first.text for t in terms):
            return first
        if not first.is_leaf:
            return Term(first.kind, None, tuple(_au(tuple(t.children[i] for t in terms), holes)
                                                for i in range(len(first.children))))
    return holes.hole(tuple(text_of(t) for t in terms))


def _au_after(terms: tuple[Term, ...], holes: _Holes) -> tuple[Pattern, bool]:
    """The after-side, with the before-side's holes: (pattern, open)."""
    texts = tuple(text_of(t) for t in terms)
    # A single token with the same text in every example is kept as written, not a hole.
    if texts in holes.by_texts and (len(set(texts)) > 1 or not terms[0].is_leaf):
        return Hole(holes.by_texts[texts]), False
    first = terms[0]
    if _alike(terms):
        if first.is_leaf and all(t.text == first.text for t in terms):
            return first, False
        if not first.is_leaf:
            parts = [_au_after(tuple(t.children[i] for t in terms), holes)
                     for i in range(len(first.children))]
            return Term(first.kind, None, tuple(p for p, _ in parts)), any(o for _, o in parts)
    if len(set(texts)) == 1:  # the same text, parsed differently: keep it as text
        return Term("text", texts[0]), False
    return Term("text", "/*?*/"), True


def _subtrees(pattern: Pattern) -> set[Pattern]:
    found = {pattern}
    if isinstance(pattern, Term):
        for child in pattern.children:
            found |= _subtrees(child)
    return found


def _has_hole(pattern: Pattern) -> bool:
    return isinstance(pattern, Hole) or any(_has_hole(c) for c in pattern.children)


# Bracketed lists stay lists when abstracted: their items become holes, not the brackets.
_LISTS = frozenset({"argument_list", "parameter_list", "initializer_list"})
# A statement a step carries over unchanged is a hole even in one example: the step does
# not look inside it (a __launch_bounds__ step does not depend on the body it leaves).
_STATEMENTS = frozenset({
    "compound_statement", "expression_statement", "declaration", "for_statement", "while_statement",
    "do_statement", "if_statement", "return_statement", "switch_statement",
})


def _abstract(pattern: Pattern, terms: tuple[Term, ...], carried: set[Pattern], holes: _Holes,
              root: bool = False, statements: bool = True) -> Pattern:
    """`pattern` again, with each maximal part that the steps carried over unchanged (it
    reappears whole in the after-side) and that already differs across them (it has a
    hole), or that is a whole statement, turned into one hole: the rewrite never looks
    inside it."""
    if isinstance(pattern, Hole):
        return holes.hole(tuple(text_of(t) for t in terms))
    whole = (not root and pattern in carried and pattern.kind not in _LISTS
             and (_has_hole(pattern) or (statements and pattern.kind in _STATEMENTS)))
    if whole:
        return holes.hole(tuple(text_of(t) for t in terms))
    if pattern.is_leaf:
        return pattern
    return Term(pattern.kind, None, tuple(_abstract(p, tuple(t.children[i] for t in terms), carried, holes,
                                                    statements=statements)
                                          for i, p in enumerate(pattern.children)))


def generalise(edits: list[Edit]) -> Rewrite | None:
    """The anti-unification of edits of one node kind (None when the kinds differ). The
    context is the parent kind they share, or any when they do not. Parts carried over
    unchanged are abstracted whole (`expf(x[i] - m)` and `expf(v[r] - mx)` give
    `expf(?0)`, not `expf(?0[?1] - ?2)`): the least general pattern of what the step
    changes, not of what it leaves alone."""
    if not edits or len({e.kind for e in edits}) != 1:
        return None
    befores, afters = tuple(e.before for e in edits), tuple(e.after for e in edits)
    first = _Holes()
    plain = _au(befores, first)
    carried = _subtrees(_au_after(afters, first)[0])
    holes = _Holes()
    before = _abstract(plain, befores, carried, holes, root=True)
    if _concrete(before) < MIN_CONCRETE_TOKENS <= _concrete(plain):
        # Abstracting whole statements would leave too little to match on: keep them.
        holes = _Holes()
        before = _abstract(plain, befores, carried, holes, root=True, statements=False)
    after, is_open = _au_after(afters, holes)
    contexts = {e.context for e in edits}
    ordered = sorted(holes.by_texts.items(), key=lambda item: item[1])
    return Rewrite(kind=edits[0].kind, context=contexts.pop() if len(contexts) == 1 else "",
                   before=before, after=after, holes=len(ordered), examples=len(edits),
                   concrete_tokens=_concrete(before), open=is_open,
                   bindings=[list(texts) for texts, _ in ordered])


def _concrete(pattern: Pattern) -> int:
    if isinstance(pattern, Hole):
        return 0
    if pattern.is_leaf:
        return 1
    return sum(_concrete(c) for c in pattern.children)


def show(pattern: Pattern) -> str:
    """The pattern as text, holes as ?N."""
    return render(_show_tokens(pattern))


def _show_tokens(pattern: Pattern) -> list[str]:
    if isinstance(pattern, Hole):
        return [f"?{pattern.index}"]
    if pattern.is_leaf:
        return [pattern.text or ""]
    return [t for c in pattern.children for t in _show_tokens(c)]


# --- matching and instantiation ---------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    source: str
    start_byte: int
    end_byte: int
    bindings: dict[int, str]

    def diff(self, original: str) -> str:
        return "".join(difflib.unified_diff(original.splitlines(keepends=True),
                                            self.source.splitlines(keepends=True),
                                            fromfile="before.cu", tofile="after.cu"))


def _match(pattern: Pattern, node: Node, bound: dict[int, tuple[str, str]],
           gaps: dict[int, str] | None = None, spaces: dict[int, str | None] | None = None) -> bool:
    """Binds each hole to (its tokens, its source text): occurrences must agree on the
    tokens (layout aside); the instantiation uses the text as written, and `spaces` keeps
    the layout before each hole's first binding."""
    if isinstance(pattern, Hole):
        tokens = text_of(term_of(node))
        seen = bound.setdefault(pattern.index, (tokens, (node.text or b"").decode()))
        if spaces is not None and gaps is not None and pattern.index not in spaces:
            first = _leaf_nodes(node)
            spaces[pattern.index] = gaps.get(first[0].id) if first else None
        return seen[0] == tokens
    if node.type != pattern.kind:
        return False
    children = [] if node.type in _ATOMS else [c for c in node.children if c.type != "comment"]
    if pattern.is_leaf:
        atom = not children or node.type in _ATOMS
        return atom and (node.text or b"").decode() == pattern.text
    if len(children) != len(pattern.children):
        return False
    return all(_match(p, c, bound, gaps, spaces) for p, c in zip(pattern.children, children, strict=True))


def _instantiate(pattern: Pattern, bound: dict[int, tuple[str, str]],
                 before_hole: dict[int, str | None]) -> list[tuple[str | None, str]]:
    """(space, text) pieces; a hole takes the layout its text had in the kernel."""
    if isinstance(pattern, Hole):
        return [(before_hole.get(pattern.index), bound[pattern.index][1])]
    if pattern.is_leaf:
        return [(pattern.space, pattern.text or "")]
    return [piece for c in pattern.children for piece in _instantiate(c, bound, before_hole)]


class Parsed:
    """A kernel parsed once for many rewrites: its tree, layout and nodes by kind."""

    def __init__(self, source: str) -> None:
        self.source, self.raw = source, source.encode()
        self.tree = parse(self.raw)
        self.gaps = layout(self.tree.root_node, self.raw)
        self.by_kind: dict[str, list[Node]] = {}
        stack = [self.tree.root_node]
        while stack:
            node = stack.pop()
            self.by_kind.setdefault(node.type, []).append(node)
            stack.extend(node.children)
        for nodes in self.by_kind.values():
            nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))


def apply(rewrite: Rewrite, source: str, parsed: Parsed | None = None) -> list[Applied]:
    """Every place `rewrite` matches in `source`, each instantiated on its own. `parsed`:
    the same source parsed already (a source proposing many rewrites parses once)."""
    if rewrite.open:
        return []
    parsed = parsed if parsed is not None and parsed.source == source else Parsed(source)
    raw, gaps = parsed.raw, parsed.gaps
    found: list[Applied] = []
    for node in parsed.by_kind.get(rewrite.kind, []):
        if rewrite.context and (node.parent.type if node.parent is not None else "") != rewrite.context:
            continue
        bound: dict[int, tuple[str, str]] = {}
        spaces: dict[int, str | None] = {}
        if not _match(rewrite.before, node, bound, gaps, spaces):
            continue
        text = render_laid_out(_instantiate(rewrite.after, bound, spaces))
        new = raw[:node.start_byte] + text.encode() + raw[node.end_byte:]
        found.append(Applied(new.decode(), node.start_byte, node.end_byte,
                             {index: written for index, (_, written) in bound.items()}))
    return found


# --- clustering -------------------------------------------------------------------------


def cluster(edits: list[Edit]) -> list[tuple[Rewrite, list[int]]]:
    """Edits grouped greedily, as Getafix's hierarchical clustering does in one pass: each
    edit joins the first group whose anti-unification with it stays usable (closed, with
    enough concrete tokens), else starts its own. Returns each group's rewrite and the
    indices of its edits, largest groups first."""
    groups: list[list[int]] = []
    rewrites: list[Rewrite] = []
    for index, edit in enumerate(edits):
        for g, members in enumerate(groups):
            joined = generalise([edits[i] for i in members] + [edit])
            if joined is not None and joined.usable:
                members.append(index)
                rewrites[g] = joined
                break
        else:
            single = generalise([edit])
            groups.append([index])
            rewrites.append(single)
    order = sorted(range(len(groups)), key=lambda g: -len(groups[g]))
    return [(rewrites[g], groups[g]) for g in order]


def apply_everywhere(rewrite: Rewrite, source: str, parsed: Parsed | None = None) -> Applied | None:
    """`source` with `rewrite` applied at every match that does not overlap an earlier
    one (outermost first); None when it matches nowhere."""
    matches = apply(rewrite, source, parsed)
    if not matches:
        return None
    chosen: list[Applied] = []
    for match in sorted(matches, key=lambda m: (m.start_byte, -m.end_byte)):
        if chosen and match.start_byte < chosen[-1].end_byte:
            continue
        chosen.append(match)
    raw, out, at = source.encode(), [], 0
    for match in chosen:
        # Each match was instantiated on the whole source; take back only its new bytes.
        new = match.source.encode()
        tail = len(raw) - match.end_byte
        out.append(raw[at:match.start_byte])
        out.append(new[match.start_byte:len(new) - tail])
        at = match.end_byte
    out.append(raw[at:])
    bindings = {i: text for m in chosen for i, text in m.bindings.items()}
    return Applied(b"".join(out).decode(), chosen[0].start_byte, chosen[-1].end_byte, bindings)


# --- replaying a step at its own sites ----------------------------------------------------


def source_tokens(source: str) -> tuple[str, ...]:
    """The source's tokens, comments and layout left out."""
    return tuple(leaves(term_of(parse(source).root_node)))


def tokens_digest(source: str) -> str:
    """A short digest of the source's tokens: equal for sources that differ only in
    layout and comments."""
    return hashlib.sha256("\x00".join(source_tokens(source)).encode()).hexdigest()[:16]


def sites_toward(trees: list[dict[str, Any]], before: str, after: str) -> list[list[int]] | None:
    """Where a step's edits act, for replaying the step on its own before-state: for each
    edit in turn, [the ordinal of its site among its matches, how many matches there
    were], the site being the match that leaves the source closest (in tokens) to
    `after`. An edit whose pattern matches in several places (`int j = 0` -> `int g = 0`)
    is then made where the expert made it, not at the first place it fits. None when some
    edit matches nowhere."""
    target = source_tokens(after)
    source, sites = before, []
    for tree in trees:
        matches = sorted(apply(rewrite_from_dict(tree), source), key=lambda m: m.start_byte)
        if not matches:
            return None
        if len(matches) == 1:
            best = 0
        else:
            ratios = [difflib.SequenceMatcher(None, source_tokens(m.source), target,
                                              autojunk=False).ratio() for m in matches]
            best = max(range(len(matches)), key=lambda i: (ratios[i], -i))
        sites.append([best, len(matches)])
        source = matches[best].source
    return sites


def apply_at_sites(trees: list[dict[str, Any]], sites: list[list[int]] | None, source: str,
                   parsed: Parsed | None = None) -> str | None:
    """Edits (rewrite trees) applied in turn, each at one place: its recorded site when it
    matches as many places as it did where the site was recorded (sites_toward), else the
    first place it matches; None when some edit matches nowhere."""
    sites = sites or []
    for index, tree in enumerate(trees):
        matches = sorted(apply(rewrite_from_dict(tree), source, parsed), key=lambda m: m.start_byte)
        if not matches:
            return None
        ordinal, count = sites[index] if index < len(sites) else (0, 0)
        source, parsed = matches[ordinal if count == len(matches) else 0].source, None
    return source
