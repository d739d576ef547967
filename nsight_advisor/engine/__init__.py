"""The rule engine: load rule folders (``rules``), run each over the store (``runner``), judge, choose the advice
(``advice``), settle impacts (``impact``), apply the config and waivers (``config``, ``waivers``) and rank the
findings; ``analyze`` strings these together for one analysis.

Every selected rule gets exactly one :class:`~nsight_advisor.engine.model.Outcome` per analysis (findings,
clean, skipped or errored); a rule that fails never stops the others.
"""
