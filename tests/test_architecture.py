"""The house's structure: no module of the product imports itself back, however indirectly."""

from __future__ import annotations

import copy

import grimp
import pytest

PACKAGES = ("orbchat", "rooms", "memory", "corpus")


def cycles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """The groups of modules that import each other round in a circle (function-level imports too)."""
    found = set()
    for module in graph.modules:
        around = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if around:
            found.add(frozenset(around | {module}))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def test_no_module_imports_itself_back(graph):
    assert cycles(graph) == set(), "modules in a cycle: " + "; ".join(sorted(map(str, cycles(graph))))


def test_a_cycle_is_found_when_there_is_one(graph):
    graph = copy.deepcopy(graph)
    graph.add_import(importer="orbchat.redis", imported="memory.tasks")  # memory.tasks uses orbchat.redis
    assert any({"orbchat.redis", "memory.tasks"} <= cycle for cycle in cycles(graph))
