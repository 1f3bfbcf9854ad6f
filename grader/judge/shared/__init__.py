"""Check logic the layer exercises share, one module per topic (``api``, ``weights``, ``gradients``,
``config``, ``mask``, ``forward``), with the fixtures (``fixtures``), the finding of a layer's parts
by what they compute (``structure``) and the closeness of two results (``numbers``) they build on.

An exercise's ``checks.py`` imports the fixtures it uses and wraps these ``assert_*`` functions in
its own ``@check`` functions, with the numbers and words of its exercise. Everything a check accepts
as true comes from a call the parent replayed with its own numbers (``grader.judge.analysis``); what
the child merely claims (class names, trainable flags, configs) only shapes messages, or is a config
or API fact.
"""
