"""What a user copies to reuse one agent class (issue 62, "one class to copy"): the class, its bases and every
module-level name of AgentZoo.py and AgentNet.py that they name, followed through what those name in turn, with the
lines of each piece's source. tests/test_reuse.py copies such pieces into a fresh module and trains them.

    python benchmarks/lines_to_copy.py                  # every agent: pieces and lines, fewest first
    python benchmarks/lines_to_copy.py agent=AgentSAC   # one agent's pieces, each with its lines
"""
import ast
import functools
import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import AgentNet  # noqa: E402
import AgentZoo  # noqa: E402

MODULES = (AgentNet, AgentZoo)


@functools.cache
def definitions() -> dict[str, tuple[object, str]]:
    """Every module-level class, function and constant of the two files: name -> (module, its source)."""
    found = {}
    for module in MODULES:
        source = inspect.getsource(module)
        for node in ast.parse(source).body:
            names = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else \
                [target.id for target in getattr(node, "targets", []) if isinstance(target, ast.Name)]
            first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
            segment = "\n".join(source.splitlines()[first - 1:node.end_lineno])  # decorators included
            for name in names:
                found[name] = (module, segment)
    return found


@functools.cache
def pieces_to_copy(agent: str) -> list[str]:
    """The names to copy for `agent`, in the order of the files (AgentNet first), each once."""
    defined, wanted, todo = definitions(), set(), [agent]
    while todo:
        name = todo.pop()
        if name in wanted or name not in defined:
            continue
        wanted.add(name)
        todo += [node.id for node in ast.walk(ast.parse(defined[name][1])) if isinstance(node, ast.Name)]
        todo += [node.attr for node in ast.walk(ast.parse(defined[name][1]))  # AgentNet.X, AgentZoo.X
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in
                 ("AgentNet", "AgentZoo")]
    order = list(defined)
    return sorted(wanted, key=lambda name: (MODULES.index(defined[name][0]), order.index(name)))  # a cached list: copy to change


def lines_of(names: list[str]) -> int:
    defined = definitions()
    return sum(len(defined[name][1].splitlines()) for name in names)


def main(agent: str | None = None):
    if agent:
        defined = definitions()
        for name in pieces_to_copy(agent):
            print(f"{defined[name][0].__name__:9s} {name:32s} {len(defined[name][1].splitlines()):5d}")
        print(f"{agent}: {lines_of(pieces_to_copy(agent))} lines in {len(pieces_to_copy(agent))} pieces")
        return
    agents = [name for name, obj in vars(AgentZoo).items() if inspect.isclass(obj) and name.startswith("Agent")
              and obj.__module__ == "AgentZoo" and hasattr(obj, "if_off_policy") and "hyper_defaults" in dir(obj)
              and name not in ("AgentBase", "AgentOffPolicy", "AgentOnPolicy")]
    rows = sorted((lines_of(pieces_to_copy(name)), len(pieces_to_copy(name)), name) for name in agents)
    print("| agent | pieces | lines to copy |\n|---|---|---|")
    for lines, pieces, name in rows:
        print(f"| {name} | {pieces} | {lines} |")


if __name__ == "__main__":
    main(**dict(arg.split("=", 1) for arg in sys.argv[1:]))
