"""``stateflow optimize``: a resumable search over recipes and per-state models (issue 46, part 3).

:mod:`.space` reads and checks the search space, :mod:`.racing` decides which candidates go on,
:mod:`.search` runs the rungs through the runner, :mod:`.front` draws the Pareto front.
"""
