"""No two modules of services/ and shared/ reach each other through imports, however long the way round.

grimp reads every import statement, at the top of a module or inside a function, so a cycle cannot be
hidden by moving an import into a function: the shared piece has to move where both sides can import it.
"""

from __future__ import annotations

import grimp

PACKAGES = ("services", "shared")


def cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """For each direct import A → B that B also reaches back to A: the shortest way round, A first."""
    found = set()
    for importer in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                found.add((importer, *back))
    return sorted(found)


def test_no_module_of_services_or_shared_imports_one_that_imports_it_back():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert len(graph.modules) > 100  # the whole tree was read
    assert cycles(graph) == []


def test_the_check_sees_a_cycle_made_by_an_import_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "circle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circle import b\n")
    (package / "b.py").write_text("def later():\n    from circle import c\n")
    (package / "c.py").write_text("import circle.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circle", cache_dir=None)
    assert ("circle.a", "circle.b", "circle.c", "circle.a") in cycles(graph)
