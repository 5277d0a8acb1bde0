"""OptiML-X: Monte Carlo Tree Search over kernel variants, guided by profiles.

Pure Python: no Django, no Celery, no GPU. The domain enters through the protocols in
types.py (Evaluator, Judge, ProposalSource); the tree is plain data (tree.py); each
phase of the search is a named function (select, expand, backpropagate in mcts.py);
the RNG is explicit and seeded. See docs/search.md for the reward formula.
"""
