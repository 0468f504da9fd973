"""OrbChat's benchmarks, outside the product: `python -m bench BENCHMARK`, one of `BENCHMARKS`.

Each benchmark is a module of this package with a `Bench` class: its `help`, its options
(`add_arguments`) and `handle`, which runs it, prints its table and writes its JSON. They use the
apps' public services and selectors, and the fake provider of `tests.fakes.llm`; the apps never
import this package. What they measure and the numbers: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = ("turn", "pages", "backfill", "recall", "planted", "corpus", "embed", "cache", "worldinfo")


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark `argv` names, with its options (by default those of the command line).

    Django must be set up already (`python -m bench` does it).
    """
    # Imported here, like each benchmark below: `python -m bench` loads this package before it
    # sets up Django, and the benchmarks import the apps' models.
    from django.conf import settings

    from bench.kit import BenchError

    # The benchmarks' stand-in providers listen on loopback: allow it, as an operator allows a
    # local model server, unless the run says otherwise.
    settings.OUTBOUND_ALLOW = settings.OUTBOUND_ALLOW or "127.0.0.1"

    parser = argparse.ArgumentParser(prog="python -m bench", description="Run one of OrbChat's benchmarks.")
    subparsers = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    benches = {}
    for name in BENCHMARKS:
        module = importlib.import_module(f"bench.{name}")
        bench = module.Bench()
        parser_of = subparsers.add_parser(
            name,
            help=bench.help,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        bench.add_arguments(parser_of)
        benches[name] = bench
    options = vars(parser.parse_args(argv))
    try:
        benches[options.pop("benchmark")].handle(**options)
    except BenchError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
