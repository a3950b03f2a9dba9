"""CI regression of controller behaviour: suites, golden decision traces, ``react regress``.

A team that changes REACT's policy, or plugs in its own controller, wants every pull request to
say which scenarios got better, which got worse and which decisions changed. A *suite*
(:mod:`react.run.regress.suite`) lists scenarios, the metrics to watch and their tolerances;
:mod:`react.run.regress.runner` runs each scenario with each controller in parallel (the sweep
machinery), twice in separate processes to prove it deterministic; :mod:`react.run.regress.golden`
records one small JSON file per case; :mod:`react.run.regress.compare` compares a rerun with it;
:mod:`react.run.regress.render` writes the terminal table, a Markdown summary and JUnit XML;
:mod:`react.commands.regress` is the ``react regress`` command (also ``python -m react regress``).
Controllers other than REACT come from :mod:`react.control.policies`.
"""
