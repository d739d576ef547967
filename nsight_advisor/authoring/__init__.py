"""Writing rules: the ``rules`` commands (list, show, new, test, lint) and a rule folder's test cases.

Built on the engine: a rule's cases run through the same loader and runner an analysis uses.
"""
