"""The shared kit: what every benchmark and method builds on.

Action parsing, the blackboard records an episode keeps, the generic environment tool and the
conditions flows branch on, response-format grammars, prompt loading, the fixed task samples and
the typed records a benchmark (:class:`~stateflow.tasks.kit.benchmark.Benchmark`) and an episode
(:class:`~stateflow.tasks.kit.episode_record.EpisodeRecord`) are made of.

Layer: imports only the core, ``stateflow.envs`` and ``stateflow.sf_agent``; nothing else of
``stateflow.tasks`` (tests/core/test_layering.py).
"""
