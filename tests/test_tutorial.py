"""Tutorial.py: self-contained, and each algorithm reaches its target within a fixed budget and seed."""
import ast
import os

import pytest

import Tutorial

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tutorial_imports_none_of_the_library():
    tree = ast.parse(open(os.path.join(ROOT, "Tutorial.py")).read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"time", "copy", "gymnasium", "numpy", "torch"}, imported
    assert not imported & {"AgentRun", "AgentZoo", "AgentNet"}


def test_tutorial_reads_in_one_sitting():
    assert len(open(os.path.join(ROOT, "Tutorial.py")).read().splitlines()) <= 400


@pytest.mark.parametrize("name, target, max_steps", [
    ("dqn", 475.0, 50_000),
    ("ddpg", -200.0, 20_000),
    ("ppo", 475.0, 100_000),
])
@pytest.mark.learning
def test_tutorial_reaches_its_target(name, target, max_steps):
    result = getattr(Tutorial, f"run__tutorial_{name}")(seed=0, max_steps=max_steps, target=target)
    assert result["return"] >= target, result
    assert result["steps"] <= max_steps
